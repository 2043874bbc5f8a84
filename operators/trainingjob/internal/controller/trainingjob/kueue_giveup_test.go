package trainingjob

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/kueue"
)

// childWorkload is the Workload of the child with UID "child", with these
// conditions and spec.active.
func childWorkload(active bool, conds ...[4]string) *unstructured.Unstructured {
	wl := workload(conds...)
	wl.SetNamespace("ns")
	wl.SetName("job-mnist-r1-abcde")
	wl.SetLabels(map[string]string{kueue.JobUIDLabel: "child"})
	_ = unstructured.SetNestedField(wl.Object, active, "spec", "active")
	_ = unstructured.SetNestedField(wl.Object, "team-queue", "spec", "queueName")
	return wl
}

// queuedScope is a reconcile's scope of a TrainingJob whose suspended
// child, of UID "child", waits in team-queue.
func queuedScope(now time.Time) *scope {
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mnist", Generation: 1}}
	tj.Spec.QueueName = "team-queue"
	s := newScope(tj, now)
	s.be = nativejob.NewBackend(testSettings)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mnist-r1", UID: "child", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Labels: map[string]string{trainingv1alpha1.LabelKueueQueueName: "team-queue"}}}
	job.Spec.Suspend = ptr.To(true)
	s.job, s.state = job, s.be.Observe(job)
	return s
}

// TestKueueGivingUpIsShown: a Workload Kueue deactivated (an
// administrator set spec.active false, or Kueue after too many requeues)
// makes the TrainingJob Stalled with Kueue's words, and it waits again
// once the Workload is active; a Workload Kueue finished without the job
// running fails it with Kueue's message.
func TestKueueGivingUpIsShown(t *testing.T) {
	const requeued = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
	for name, tc := range map[string]struct {
		wl                  *unstructured.Unstructured
		stalled, failed     bool
		reason, wantMessage string
	}{
		"deactivated by an administrator": {
			wl:      childWorkload(false, [4]string{"QuotaReserved", "False", "Pending", "The workload is deactivated"}, [4]string{"Evicted", "True", "Deactivated", "The workload is deactivated"}),
			stalled: true, reason: ReasonWorkloadDeactivated, wantMessage: "The workload is deactivated",
		},
		"deactivated by Kueue after too many requeues": {
			wl:      childWorkload(false, [4]string{"Evicted", "True", "Deactivated", requeued}),
			stalled: true, reason: ReasonWorkloadDeactivated, wantMessage: requeued,
		},
		"active again": {
			wl: childWorkload(true, [4]string{"QuotaReserved", "False", "Pending", "insufficient quota"}),
		},
		"finished without running": {
			wl:     childWorkload(true, [4]string{"QuotaReserved", "True", "QuotaReserved", "Quota reserved"}, [4]string{"Finished", "True", "FailedToStart", "invalid pod set: too many pods"}),
			failed: true, reason: ReasonWorkloadFinished, wantMessage: "FailedToStart: invalid pod set: too many pods",
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.wl).Build()
			r := &Reconciler{Client: c, APIReader: c, WatchesWorkloads: true}
			s := queuedScope(t0)
			if _, err := r.observeWorkload(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			setStatus(s.tj, s.observation())
			stalled := conditions.Get(s.tj, commonv1alpha1.ConditionStalled)
			switch {
			case tc.failed:
				f := conditions.Get(s.tj, commonv1alpha1.ConditionFailed)
				if f == nil || f.Status != metav1.ConditionTrue || f.Reason != tc.reason || !strings.Contains(f.Message, tc.wantMessage) ||
					!conditions.IsTrue(s.tj, trainingv1alpha1.ConditionFinished) || s.tj.Status.Phase != trainingv1alpha1.PhaseFailed {
					t.Errorf("Failed %+v phase %s, want Failed/%s saying %q", f, s.tj.Status.Phase, tc.reason, tc.wantMessage)
				}
			case tc.stalled:
				if stalled == nil || stalled.Reason != tc.reason || !strings.Contains(stalled.Message, tc.wantMessage) || !conditions.IsTrue(s.tj, trainingv1alpha1.ConditionQueued) {
					t.Errorf("Stalled %+v, want %s saying %q, still Queued", stalled, tc.reason, tc.wantMessage)
				}
			default:
				if stalled != nil || !conditions.IsTrue(s.tj, trainingv1alpha1.ConditionQueued) {
					t.Errorf("Stalled %+v Queued %+v, want waiting in the queue", stalled, conditions.Get(s.tj, trainingv1alpha1.ConditionQueued))
				}
			}
			t.Logf("%s: %v", name, s.tj.Status.Conditions)
		})
	}
}

// TestChildDeletedByKueueAfterDeactivationIsNotRecreated: Kueue deletes
// the child of a Workload it deactivated when its
// objectRetentionPolicies.workloads.afterDeactivatedByKueue says so; the
// run is not created again (Kueue would deactivate it again), the
// TrainingJob fails with the deactivation's reason and message.
func TestChildDeletedByKueueAfterDeactivationIsNotRecreated(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c, APIReader: c, WatchesWorkloads: true}
	s := queuedScope(t0)
	s.job = nil
	s.tj.Status.ObservedGeneration = 1
	s.tj.Status.Run = 1
	s.tj.Status.Job = &trainingv1alpha1.JobReference{APIVersion: "batch/v1", Kind: "Job", Name: "mnist-r1"}
	conditions.MarkStalled(s.tj, ReasonWorkloadDeactivated, "Kueue deactivated Workload job-mnist-r1-abcde: too many requeues")
	if _, err := r.observeJob(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if s.mayCreate {
		t.Fatal("the run Kueue gave up on would be created again")
	}
	setStatus(s.tj, s.observation())
	f := conditions.Get(s.tj, commonv1alpha1.ConditionFailed)
	if f == nil || f.Status != metav1.ConditionTrue || f.Reason != ReasonWorkloadDeactivated || !strings.Contains(f.Message, "too many requeues") ||
		!conditions.IsTrue(s.tj, trainingv1alpha1.ConditionFinished) {
		t.Errorf("Failed %+v, want Failed/%s with Kueue's message; conditions %v", f, ReasonWorkloadDeactivated, s.tj.Status.Conditions)
	}
}
