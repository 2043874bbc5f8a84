package notebook

import (
	"cmp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
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
	// culled are the culled notebooks with accelerators, so that the
	// accelerator-seconds they freed are counted even when they are
	// deleted while culled: the Notebook, without a finalizer, is gone by
	// the time the operator hears of it. The record is rebuilt from the
	// durable culled-at annotation at the first reconcile after an
	// operator restart.
	culled map[types.NamespacedName]culledAccelerators
}

// culledAccelerators is what a culled notebook would hold if it ran.
type culledAccelerators struct {
	accType string
	count   float64
	since   time.Time
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
			"Accelerator-seconds freed by culling: accelerators per pod times the time a culled notebook stayed stopped, counted when it starts again, is suspended or is deleted.", "type"),
		runners: map[types.NamespacedName]bool{},
		culled:  map[types.NamespacedName]culledAccelerators{},
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
	acc := s.nb.Spec.Resources.Accelerators
	if s.input.Accelerator == nil || acc == nil || acc.Count == 0 || s.annotations == nil {
		// No accelerators, or the reconcile stopped before deciding
		// whether the notebook runs: nothing to count or record.
		return
	}
	if s.wasCulledFor > 0 {
		m.accelerator.WithLabelValues(s.input.Accelerator.Type).Add(float64(acc.Count) * s.wasCulledFor.Seconds())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	culledAt, err := time.Parse(time.RFC3339, s.annotations[render.AnnotationCulledAt])
	switch {
	case s.culled != "" && err == nil:
		m.culled[key] = culledAccelerators{accType: s.input.Accelerator.Type, count: float64(acc.Count), since: culledAt}
	case s.culled == "":
		// Started again or suspended: counted above through wasCulledFor.
		delete(m.culled, key)
	}
}

// forget drops a deleted Notebook, counting the accelerator-seconds it
// freed if it was culled until now.
func (m *notebookMetrics) forget(key types.NamespacedName, now time.Time) {
	m.mu.Lock()
	delete(m.runners, key)
	n := len(m.runners)
	c, wasCulled := m.culled[key]
	delete(m.culled, key)
	m.mu.Unlock()
	m.running.WithLabelValues().Set(float64(n))
	if wasCulled && now.After(c.since) {
		m.accelerator.WithLabelValues(c.accType).Add(c.count * now.Sub(c.since).Seconds())
	}
}

// phasesMetric is the name of the scrape-time count of Notebooks.
const phasesMetric = "mlplatform_notebook_notebooks"

// NewPhaseCollector counts Notebooks by namespace and phase from reader
// (the manager's cache) at scrape time; a Notebook not yet given a phase
// counts as Pending.
func NewPhaseCollector(reader client.Reader) *metrics.CountCollector {
	return metrics.NewCountCollector(reader, func() client.ObjectList { return &notebooksv1alpha1.NotebookList{} },
		phasesMetric, "Notebooks by namespace and phase (status.phase: Pending, Running, Suspended, Culled, Failed).", []string{"namespace", "phase"},
		func(o runtime.Object) []string {
			nb := o.(*notebooksv1alpha1.Notebook)
			return []string{nb.Namespace, string(cmp.Or(nb.Status.Phase, notebooksv1alpha1.PhasePending))}
		})
}
