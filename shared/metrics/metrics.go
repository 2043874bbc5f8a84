package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Namespace prefixes every metric name so that dashboards and alerts can
// select all of ml-platform's series with one matcher.
const Namespace = "mlplatform"

// DurationBuckets suits reconcile and API latencies, which range from a few
// milliseconds (a cache hit and no change) to tens of seconds (an external
// system that is slow to answer).
var DurationBuckets = prometheus.ExponentialBuckets(0.005, 2, 14)

// NewCounterVec creates a counter vector and registers it on
// controller-runtime's registry. If an identical collector is already
// registered, that one is returned so that constructing a reconciler twice in
// one process shares the series instead of panicking. It panics, as promauto
// does, if the name is taken by a collector with a different help text,
// labels or type, because that is a programming error.
func NewCounterVec(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return register(ctrlmetrics.Registry, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Subsystem: subsystem,
		Name:      name,
		Help:      help,
	}, labels))
}

// NewGaugeVec creates a gauge vector and registers it on controller-runtime's
// registry, reusing an identical collector that is already registered (see
// NewCounterVec).
func NewGaugeVec(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	return register(ctrlmetrics.Registry, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Subsystem: subsystem,
		Name:      name,
		Help:      help,
	}, labels))
}

// NewHistogramVec creates a histogram vector and registers it on
// controller-runtime's registry, reusing an identical collector that is
// already registered (see NewCounterVec). Nil buckets mean DurationBuckets,
// since most histograms in an operator measure durations in seconds.
func NewHistogramVec(subsystem, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	if buckets == nil {
		buckets = DurationBuckets
	}
	return register(ctrlmetrics.Registry, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Subsystem: subsystem,
		Name:      name,
		Help:      help,
		Buckets:   buckets,
	}, labels))
}

// register takes the registerer as a parameter so that tests can exercise
// the reuse path on a private registry without touching the global one.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	err := reg.Register(c)
	if err == nil {
		if reg == ctrlmetrics.Registry {
			define(c)
		}
		return c
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(T); ok {
			return existing
		}
		panic(fmt.Sprintf("metrics: the name is already registered by a %T, not a %T", already.ExistingCollector, c))
	}
	panic(fmt.Sprintf("metrics: registering collector: %v", err))
}
