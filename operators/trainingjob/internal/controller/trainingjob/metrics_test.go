package trainingjob

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
)

// assertedMetrics names, for each metric the operator defines, the test
// that drives it and asserts its value. TestEveryMetricIsAsserted fails
// when a metric is added without an entry here.
var assertedMetrics = map[string]string{
	"mlplatform_trainingjob_created_total":                  "TestMetricsThroughTheReconciler",
	"mlplatform_trainingjob_succeeded_total":                "TestMetricsOfEveryTransition",
	"mlplatform_trainingjob_failed_total":                   "TestMetricsOfEveryTransition",
	"mlplatform_trainingjob_time_to_running_seconds":        "TestMetricsOfEveryTransition",
	"mlplatform_trainingjob_duration_seconds":               "TestMetricsOfEveryTransition",
	"mlplatform_trainingjob_accelerator_seconds_total":      "TestMetricsOfEveryTransition",
	"mlplatform_trainingjob_restarted_total":                "TestMetricsOfEveryTransition",
	"mlplatform_trainingjob_accelerator_seconds_lost_total": "TestMetricsOfEveryTransition",
	"mlplatform_trainingjob_queue_wait_seconds":             "TestQueueWaitIsObservedOncePerAdmission",
	"mlplatform_trainingjob_restarts_exhausted_total":       "TestMetricsOfEveryTransition",
	"mlplatform_trainingjob_trainingjobs":                   "TestMetricsThroughTheReconciler",
}

// TestEveryMetricIsAsserted is the guard: every mlplatform_trainingjob_*
// metric registered in this process must be listed in assertedMetrics
// under a test that names it.
func TestEveryMetricIsAsserted(t *testing.T) {
	NewMetrics()
	metricstest.RequireAsserted(t, assertedMetrics, []string{"mlplatform_trainingjob_"}, NewPhaseCollector(nil))
}

// metricsJob is a PyTorch job with two workers of two accelerators each,
// created at t0.
func metricsJob(ns string) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m", CreationTimestamp: metav1.NewTime(t0)},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch, Workers: 2,
			Resources: &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 2}},
		},
	}
}

func at(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(t0.Add(d))) }

func finishedAs(tj *trainingv1alpha1.TrainingJob, failed bool, start, end time.Duration) *trainingv1alpha1.TrainingJob {
	tj = tj.DeepCopy()
	tj.Status.StartTime, tj.Status.CompletionTime = at(start), at(end)
	if failed {
		conditions.MarkFailed(tj, ReasonFailed, "failed")
	} else {
		conditions.MarkSucceeded(tj, ReasonSucceeded, "done")
	}
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionFinished, ReasonFinished, "finished")
	return tj
}

func withCheckpoint(tj *trainingv1alpha1.TrainingJob, maxRestarts, restarts int32, class trainingv1alpha1.FailureClass) *trainingv1alpha1.TrainingJob {
	tj = tj.DeepCopy()
	tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{MaxRestarts: ptr.To(maxRestarts)}
	tj.Status.RestartCount = restarts
	tj.Status.Failure = &trainingv1alpha1.Failure{Class: class, Cause: "Preempted"}
	return tj
}

// TestMetricsOfEveryTransition drives observeTransitions through each
// transition a TrainingJob makes and asserts the exact values recorded.
// Each case has its own namespace label, so the cases and the package's
// other tests never share a series.
func TestMetricsOfEveryTransition(t *testing.T) {
	m := NewMetrics()
	base := metricsJob("")
	ns := func(name string) map[string]string { return map[string]string{"namespace": name} }
	nsFw := func(name string) map[string]string {
		return map[string]string{"namespace": name, "framework": "pytorch"}
	}
	outcome := func(name, o string) map[string]string {
		return map[string]string{"namespace": name, "framework": "pytorch", "outcome": o}
	}
	acc := func(name string) map[string]string { return map[string]string{"namespace": name, "type": "a100"} }
	for name, tc := range map[string]struct {
		before, after func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob
		now           time.Duration
		check         func(t *testing.T, ns string)
	}{
		"pods start 30 s after creation": {
			before: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob { return tj },
			after: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				tj.Status.StartTime = at(30 * time.Second)
				return tj
			},
			check: func(t *testing.T, n string) {
				expectHistogram(t, "mlplatform_trainingjob_time_to_running_seconds", nsFw(n), 1, 30)
			},
		},
		"a preempted run of 100 s is restarted": {
			before: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob { return tj },
			after: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				tj.Status.RestartCount = 1
				tj.Status.Runs = []trainingv1alpha1.RunRecord{{Run: 1, Class: trainingv1alpha1.FailureClassInfrastructure, Reason: "Preempted", StartTime: at(0), EndTime: at(100 * time.Second)}}
				return tj
			},
			check: func(t *testing.T, n string) {
				expectValue(t, "mlplatform_trainingjob_restarted_total", map[string]string{"namespace": n, "class": "Infrastructure", "reason": "Preempted"}, 1)
				// Two pods with two accelerators each for 100 s.
				expectValue(t, "mlplatform_trainingjob_accelerator_seconds_lost_total", acc(n), 400)
			},
		},
		"succeeds after 1000 s": {
			before: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				tj.Status.StartTime = at(10 * time.Second)
				return tj
			},
			after: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				return finishedAs(tj, false, 10*time.Second, 1010*time.Second)
			},
			now: time.Hour,
			check: func(t *testing.T, n string) {
				expectValue(t, "mlplatform_trainingjob_succeeded_total", nsFw(n), 1)
				expectValue(t, "mlplatform_trainingjob_failed_total", nsFw(n), 0)
				expectHistogram(t, "mlplatform_trainingjob_duration_seconds", outcome(n, "succeeded"), 1, 1000)
				expectValue(t, "mlplatform_trainingjob_accelerator_seconds_total", acc(n), 4000)
			},
		},
		"fails because its one restart is used": {
			before: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob { return tj },
			after: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				return finishedAs(withCheckpoint(tj, 1, 1, trainingv1alpha1.FailureClassInfrastructure), true, 0, 50*time.Second)
			},
			check: func(t *testing.T, n string) {
				expectValue(t, "mlplatform_trainingjob_failed_total", nsFw(n), 1)
				expectValue(t, "mlplatform_trainingjob_restarts_exhausted_total", ns(n), 1)
				expectHistogram(t, "mlplatform_trainingjob_duration_seconds", outcome(n, "failed"), 1, 50)
				expectValue(t, "mlplatform_trainingjob_accelerator_seconds_total", acc(n), 200)
			},
		},
		"fails with a user error while restarts are left": {
			before: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob { return tj },
			after: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				return finishedAs(withCheckpoint(tj, 3, 0, trainingv1alpha1.FailureClassUser), true, 0, 50*time.Second)
			},
			check: func(t *testing.T, n string) {
				expectValue(t, "mlplatform_trainingjob_failed_total", nsFw(n), 1)
				expectValue(t, "mlplatform_trainingjob_restarts_exhausted_total", ns(n), 0)
			},
		},
		"fails with a user error after the restarts ran out": {
			before: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob { return tj },
			after: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				return finishedAs(withCheckpoint(tj, 1, 1, trainingv1alpha1.FailureClassUser), true, 0, 50*time.Second)
			},
			check: func(t *testing.T, n string) {
				expectValue(t, "mlplatform_trainingjob_restarts_exhausted_total", ns(n), 0)
			},
		},
		"fails before it ran, without a checkpoint": {
			before: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob { return tj },
			after: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				tj = finishedAs(tj, true, 0, 20*time.Second)
				tj.Status.StartTime = nil
				tj.Status.Failure = &trainingv1alpha1.Failure{Class: trainingv1alpha1.FailureClassInfrastructure}
				return tj
			},
			check: func(t *testing.T, n string) {
				expectValue(t, "mlplatform_trainingjob_failed_total", nsFw(n), 1)
				expectValue(t, "mlplatform_trainingjob_restarts_exhausted_total", ns(n), 0)
				// Never started: its duration counts from creation, and it held no accelerators.
				expectHistogram(t, "mlplatform_trainingjob_duration_seconds", outcome(n, "failed"), 1, 20)
				expectValue(t, "mlplatform_trainingjob_accelerator_seconds_total", acc(n), 0)
			},
		},
		"a finished job observed again counts nothing twice": {
			before: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				return finishedAs(withCheckpoint(tj, 1, 1, trainingv1alpha1.FailureClassInfrastructure), true, 0, 50*time.Second)
			},
			after: func(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
				return finishedAs(withCheckpoint(tj, 1, 1, trainingv1alpha1.FailureClassInfrastructure), true, 0, 50*time.Second)
			},
			check: func(t *testing.T, n string) {
				expectValue(t, "mlplatform_trainingjob_failed_total", nsFw(n), 0)
				expectValue(t, "mlplatform_trainingjob_restarts_exhausted_total", ns(n), 0)
				expectHistogram(t, "mlplatform_trainingjob_duration_seconds", outcome(n, "failed"), 0, 0)
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := "metrics-" + name
			tj := base.DeepCopy()
			tj.Namespace = n
			before, after := tc.before(tj.DeepCopy()), tc.after(tj.DeepCopy())
			m.observeTransitions(before, after, testSettings.Catalog, t0.Add(tc.now))
			tc.check(t, n)
		})
	}
}

func expectValue(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	if got := metricstest.Value(t, name, labels); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func expectHistogram(t *testing.T, name string, labels map[string]string, wantCount uint64, wantSum float64) {
	t.Helper()
	if n, sum := metricstest.Histogram(t, name, labels); n != wantCount || sum != wantSum {
		t.Errorf("%s%v: %d observations summing to %v, want %d summing to %v", name, labels, n, sum, wantCount, wantSum)
	}
}

// TestQueueWaitIsObservedOncePerAdmission drives observeAdmission: one
// sample with the status write that records the admission, measured to
// Kueue's Admitted time when the Workload was read, from the Job's
// creation or from the eviction that sent the run back; none when the
// admission was already recorded (a later reconcile, a restarted operator).
func TestQueueWaitIsObservedOncePerAdmission(t *testing.T) {
	m := NewMetrics()
	queuedAs := func(reason string, since time.Duration) *trainingv1alpha1.TrainingJob {
		tj := metricsJob("")
		tj.Spec.QueueName = "team-queue"
		status := metav1.ConditionTrue
		if reason == ReasonAdmitted {
			status = metav1.ConditionFalse
		}
		tj.Status.Conditions = []metav1.Condition{{Type: trainingv1alpha1.ConditionQueued, Status: status, Reason: reason, LastTransitionTime: *at(since)}}
		return tj
	}
	job := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: *at(10 * time.Second)}}
	for name, tc := range map[string]struct {
		before    *trainingv1alpha1.TrainingJob
		admission *admission
		wantCount uint64
		wantSum   float64
	}{
		"Kueue's admission time, from the Job's creation": {
			before: queuedAs(ReasonWaiting, 12*time.Second), admission: &admission{waited: 80 * time.Second}, wantCount: 1, wantSum: 80,
		},
		"no Workload read: until now, from the Job's creation": {
			before: queuedAs(ReasonWaiting, 12*time.Second), wantCount: 1, wantSum: 90,
		},
		"re-admitted after an eviction: from the eviction": {
			before: queuedAs(ReasonEvicted, 70*time.Second), wantCount: 1, wantSum: 30,
		},
		"already recorded": {
			before: queuedAs(ReasonAdmitted, 50*time.Second), admission: &admission{waited: 80 * time.Second},
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := "qw-" + strings.ReplaceAll(name, " ", "-")
			before := tc.before.DeepCopy()
			before.Namespace = n
			after := before.DeepCopy()
			conditions.MarkFalse(after, trainingv1alpha1.ConditionQueued, ReasonAdmitted, "admitted")
			s := &scope{tj: before, job: job, now: t0.Add(100 * time.Second), admission: tc.admission}
			m.observeAdmission(before, after, s)
			expectHistogram(t, "mlplatform_trainingjob_queue_wait_seconds", map[string]string{"namespace": n, "queue": "team-queue"}, tc.wantCount, tc.wantSum)
		})
	}
}
