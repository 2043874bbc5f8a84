package trainingjob

import (
	"cmp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/failure"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/restart"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/metrics"
)

// subsystem makes every series mlplatform_trainingjob_*.
const subsystem = "trainingjob"

// jobBuckets suit training durations, from seconds to days.
var jobBuckets = prometheus.ExponentialBuckets(1, 4, 10)

// Metrics are the operator's domain metrics. They are observed once per
// transition, right after the status write that recorded it.
type Metrics struct {
	Created            *prometheus.CounterVec
	Succeeded          *prometheus.CounterVec
	Failed             *prometheus.CounterVec
	TimeToRunning      *prometheus.HistogramVec
	Duration           *prometheus.HistogramVec
	AcceleratorSeconds *prometheus.CounterVec
	Restarted          *prometheus.CounterVec
	// AcceleratorSecondsLost counts the accelerator time of runs that
	// failed and were restarted: an upper bound of the work lost, since
	// training resumes from its last checkpoint.
	AcceleratorSecondsLost *prometheus.CounterVec
	QueueWait              *prometheus.HistogramVec
	// RestartsExhausted counts TrainingJobs that failed with a failure a
	// new run could fix because maxRestarts was reached.
	RestartsExhausted *prometheus.CounterVec
}

// NewMetrics registers the metrics on controller-runtime's registry, or
// returns the ones already registered.
func NewMetrics() *Metrics {
	return &Metrics{
		Created: metrics.NewCounterVec(subsystem, "created_total",
			"Kubeflow jobs created for TrainingJobs.", "namespace", "framework"),
		Succeeded: metrics.NewCounterVec(subsystem, "succeeded_total",
			"TrainingJobs that succeeded.", "namespace", "framework"),
		Failed: metrics.NewCounterVec(subsystem, "failed_total",
			"TrainingJobs that failed.", "namespace", "framework"),
		TimeToRunning: metrics.NewHistogramVec(subsystem, "time_to_running_seconds",
			"Seconds from a TrainingJob's creation until its pods ran.", jobBuckets, "namespace", "framework"),
		Duration: metrics.NewHistogramVec(subsystem, "duration_seconds",
			"Seconds from a TrainingJob's start until it finished.", jobBuckets, "namespace", "framework", "outcome"),
		AcceleratorSeconds: metrics.NewCounterVec(subsystem, "accelerator_seconds_total",
			"Accelerator-seconds held by finished TrainingJobs (accelerators per pod x pods x duration).", "namespace", "type"),
		Restarted: metrics.NewCounterVec(subsystem, "restarted_total",
			"Runs of TrainingJobs restarted after a failure, by failure class and cause.", "namespace", "class", "reason"),
		AcceleratorSecondsLost: metrics.NewCounterVec(subsystem, "accelerator_seconds_lost_total",
			"Accelerator-seconds held by runs that failed and were restarted (accelerators per pod x pods x run duration).", "namespace", "type"),
		QueueWait: metrics.NewHistogramVec(subsystem, "queue_wait_seconds",
			"Seconds a queued TrainingJob's run waited for Kueue to admit it: from its job's creation, or the eviction that sent it back, to the Workload's Admitted time.", jobBuckets, "namespace", "queue"),
		RestartsExhausted: metrics.NewCounterVec(subsystem, "restarts_exhausted_total",
			"TrainingJobs that failed because checkpoint.maxRestarts was reached, although a new run could have fixed the failure.", "namespace"),
	}
}

// phasesMetric is the name of the scrape-time count of TrainingJobs.
const phasesMetric = "mlplatform_trainingjob_trainingjobs"

// NewPhaseCollector counts TrainingJobs by namespace and phase from reader
// (the manager's cache) at scrape time; a job not yet given a phase counts
// as Pending.
func NewPhaseCollector(reader client.Reader) *metrics.CountCollector {
	return metrics.NewCountCollector(reader, func() client.ObjectList { return &trainingv1alpha1.TrainingJobList{} },
		phasesMetric, "TrainingJobs by namespace and phase (status.phase).", []string{"namespace", "phase"},
		func(o runtime.Object) []string {
			tj := o.(*trainingv1alpha1.TrainingJob)
			return []string{tj.Namespace, string(cmp.Or(tj.Status.Phase, trainingv1alpha1.PhasePending))}
		})
}

// restartsExhausted reports whether a job failed only because its
// restarts ran out: the same policy that decides restarts, asked again
// with the recorded failure, says so.
func restartsExhausted(tj *trainingv1alpha1.TrainingJob, now time.Time) bool {
	f := tj.Status.Failure
	if f == nil || tj.Spec.Checkpoint == nil {
		return false
	}
	d := restart.Decide(tj.Spec.Checkpoint, tj.Status.RestartCount, failure.Result{Class: f.Class, Cause: f.Cause}, now)
	return d.Reason == restart.ReasonRestartsExhaust
}

// observeTransitions records what changed between the persisted status and
// the one just written.
func (m *Metrics) observeTransitions(before, after *trainingv1alpha1.TrainingJob, catalog accelerator.Catalog, now time.Time) {
	ns, framework := after.Namespace, string(after.Spec.Framework)
	if before.Status.StartTime == nil && after.Status.StartTime != nil {
		m.TimeToRunning.WithLabelValues(ns, framework).Observe(after.Status.StartTime.Sub(after.CreationTimestamp.Time).Seconds())
	}
	if after.Status.RestartCount > before.Status.RestartCount && len(after.Status.Runs) > 0 {
		run := after.Status.Runs[len(after.Status.Runs)-1]
		m.Restarted.WithLabelValues(ns, string(run.Class), run.Reason).Inc()
		if run.StartTime != nil && run.EndTime != nil {
			if class, pods, count := acceleratorsOf(after, catalog); class != "" {
				m.AcceleratorSecondsLost.WithLabelValues(ns, class).Add(max(0, run.EndTime.Sub(run.StartTime.Time).Seconds()) * pods * count)
			}
		}
	}
	if finished(before) || !finished(after) {
		return
	}
	outcome := "succeeded"
	if conditions.IsTrue(after, commonv1alpha1.ConditionFailed) {
		outcome = "failed"
		m.Failed.WithLabelValues(ns, framework).Inc()
		if restartsExhausted(after, now) {
			m.RestartsExhausted.WithLabelValues(ns).Inc()
		}
	} else {
		m.Succeeded.WithLabelValues(ns, framework).Inc()
	}
	start := after.CreationTimestamp.Time
	if after.Status.StartTime != nil {
		start = after.Status.StartTime.Time
	}
	end := now
	if after.Status.CompletionTime != nil {
		end = after.Status.CompletionTime.Time
	}
	seconds := end.Sub(start).Seconds()
	if seconds < 0 {
		return
	}
	m.Duration.WithLabelValues(ns, framework, outcome).Observe(seconds)
	if after.Status.StartTime == nil {
		return
	}
	if class, pods, count := acceleratorsOf(after, catalog); class != "" {
		m.AcceleratorSeconds.WithLabelValues(ns, class).Add(seconds * pods * count)
	}
}

// observeAdmission observes the queue wait of a run once, with the status
// write that records Kueue's admission (Queued turns Admitted): a later
// reconcile, or a restarted operator, finds the admission recorded and
// observes nothing. A write that is lost with the operator loses the
// sample, never doubles it. The wait ends at the Workload's Admitted time;
// without a Workload (Kueue's CRD absent) it ends when the operator saw
// the admission.
func (m *Metrics) observeAdmission(before, after *trainingv1alpha1.TrainingJob, s *scope) {
	if admissionRecorded(before) || !admissionRecorded(after) || s.job == nil {
		return
	}
	waited := s.now.Sub(queueEntry(before, s.job))
	if s.admission != nil {
		waited = s.admission.waited
	}
	queue, _ := s.localQueue()
	m.QueueWait.WithLabelValues(after.Namespace, queue).Observe(max(0, waited.Seconds()))
}

// acceleratorsOf returns a TrainingJob's accelerator type, its pods and the
// accelerators of each; an empty type when it uses none.
func acceleratorsOf(tj *trainingv1alpha1.TrainingJob, catalog accelerator.Catalog) (string, float64, float64) {
	if tj.Spec.Resources == nil || tj.Spec.Resources.Accelerators == nil {
		return "", 0, 0
	}
	class, err := catalog.Resolve(tj.Spec.Resources.Accelerators)
	if err != nil || class == nil {
		return "", 0, 0
	}
	pods := tj.Pods()
	return class.Type, float64(pods), float64(tj.Spec.Resources.Accelerators.Count)
}
