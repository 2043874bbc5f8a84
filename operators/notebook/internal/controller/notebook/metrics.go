package notebook

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ml-platform/ml-platform/shared/metrics"
)

// notebookMetrics are the operator's mlplatform_notebook_* series.
type notebookMetrics struct {
	running     *prometheus.GaugeVec
	culls       *prometheus.CounterVec
	idleAtCull  *prometheus.HistogramVec
	accelerator *prometheus.CounterVec

	mu      sync.Mutex
	runners map[types.NamespacedName]bool
}

func newNotebookMetrics() *notebookMetrics {
	return &notebookMetrics{
		running: metrics.NewGaugeVec("notebook", "running",
			"Notebooks whose Jupyter server is meant to run (not suspended, not culled)."),
		culls: metrics.NewCounterVec("notebook", "culls_total",
			"Notebooks stopped by the operator, by reason (Idle, MaxLifetime).", "reason"),
		idleAtCull: metrics.NewHistogramVec("notebook", "idle_seconds_at_cull",
			"How long a notebook had been without activity when it was culled.",
			[]float64{300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 259200}, "reason"),
		accelerator: metrics.NewCounterVec("notebook", "accelerator_seconds_reclaimed_total",
			"Accelerator-seconds freed by culling: accelerators per pod times the time a culled notebook stayed stopped, counted when it starts again.", "type"),
		runners: map[types.NamespacedName]bool{},
	}
}

func (m *notebookMetrics) observe(s *scope) {
	key := types.NamespacedName{Namespace: s.nb.Namespace, Name: s.nb.Name}
	m.mu.Lock()
	if s.stalled == "" && s.replicas > 0 {
		m.runners[key] = true
	} else {
		delete(m.runners, key)
	}
	n := len(m.runners)
	m.mu.Unlock()
	m.running.WithLabelValues().Set(float64(n))

	if s.justCulled && s.decision != nil {
		m.culls.WithLabelValues(s.culled).Inc()
		m.idleAtCull.WithLabelValues(s.culled).Observe(s.decision.IdleFor.Seconds())
	}
	if s.wasCulledFor > 0 && s.input.Accelerator != nil {
		if acc := s.nb.Spec.Resources.Accelerators; acc != nil {
			m.accelerator.WithLabelValues(s.input.Accelerator.Type).Add(float64(acc.Count) * s.wasCulledFor.Seconds())
		}
	}
}

func (m *notebookMetrics) forget(key types.NamespacedName) {
	m.mu.Lock()
	delete(m.runners, key)
	n := len(m.runners)
	m.mu.Unlock()
	m.running.WithLabelValues().Set(float64(n))
}
