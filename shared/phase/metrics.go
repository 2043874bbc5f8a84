package phase

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ml-platform/ml-platform/shared/metrics"
)

// Metrics holds the skeleton's collectors. Create it once per process with
// NewMetrics and hand it to every Runner.
type Metrics struct {
	duration *prometheus.HistogramVec
}

// NewMetrics creates mlplatform_reconcile_phase_duration_seconds and
// registers it on reg (controller-runtime's metrics.Registry in an
// operator). If an identical collector is already registered there, that one
// is used, so two managers in one test process share the series.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metrics.Namespace,
		Subsystem: "reconcile",
		Name:      "phase_duration_seconds",
		Help:      "Time one phase of a reconcile took, by controller and phase.",
		Buckets:   metrics.DurationBuckets,
	}, []string{"controller", "phase"})
	if err := reg.Register(h); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return nil, err
		}
		existing, ok := already.ExistingCollector.(*prometheus.HistogramVec)
		if !ok {
			return nil, err
		}
		h = existing
	}
	return &Metrics{duration: h}, nil
}
