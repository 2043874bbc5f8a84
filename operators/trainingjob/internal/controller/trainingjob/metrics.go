package trainingjob

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
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
	}
}

// observeTransitions records what changed between the persisted status and
// the one just written.
func (m *Metrics) observeTransitions(before, after *trainingv1alpha1.TrainingJob, fw kubeflowjob.Framework, catalog accelerator.Catalog, now time.Time) {
	ns, framework := after.Namespace, string(after.Spec.Framework)
	if before.Status.StartTime == nil && after.Status.StartTime != nil {
		m.TimeToRunning.WithLabelValues(ns, framework).Observe(after.Status.StartTime.Sub(after.CreationTimestamp.Time).Seconds())
	}
	if finished(before) || !finished(after) {
		return
	}
	outcome := "succeeded"
	if conditions.IsTrue(after, commonv1alpha1.ConditionFailed) {
		outcome = "failed"
		m.Failed.WithLabelValues(ns, framework).Inc()
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
	if after.Status.StartTime == nil || fw == nil || after.Spec.Resources == nil {
		return
	}
	class, err := catalog.Resolve(after.Spec.Resources.Accelerators)
	if err != nil || class == nil {
		return
	}
	var pods int32
	for _, r := range fw.Roles(&after.Spec) {
		pods += r.Replicas
	}
	m.AcceleratorSeconds.WithLabelValues(ns, class.Type).Add(seconds * float64(pods) * float64(after.Spec.Resources.Accelerators.Count))
}
