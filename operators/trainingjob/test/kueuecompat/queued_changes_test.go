package kueuecompat

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	tjcontroller "github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/kueue"
)

// holdAndWait admits a holder that takes the queue's only GPU and makes a
// second job wait for it; it returns the waiting job and its Job.
func (s *stack) holdAndWait(t *testing.T) (holder, waiter *trainingv1alpha1.TrainingJob, waiterJob *batchv1.Job) {
	t.Helper()
	holder = s.trainingJob("holder", "team-queue", 1, 1)
	s.create(t, holder)
	s.waitTJ(t, holder, "Admitted", admitted)
	waiter = s.trainingJob("waiter", "team-queue", 1, 1)
	s.create(t, waiter)
	waiterJob = s.waitJob(t, "waiter-r1", "created suspended", func(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) })
	s.waitWorkload(t, waiterJob, "pending", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "QuotaReserved") == "False" })
	s.waitTJ(t, waiter, "Queued for quota", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })
	return holder, waiter, waiterJob
}

// update applies change to the latest TrainingJob until no conflict
// stands in the way, and returns the API server's answer.
func (s *stack) update(t *testing.T, tj *trainingv1alpha1.TrainingJob, change func(*trainingv1alpha1.TrainingJob)) error {
	t.Helper()
	var last error
	testenv.Eventually(t, "update "+tj.Name, func(ctx context.Context) (bool, error) {
		got := &trainingv1alpha1.TrainingJob{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, err
		}
		change(got)
		last = s.c.Update(ctx, got)
		return !apierrors.IsConflict(last), nil
	})
	return last
}

// TestKueueSpecChangeWhileQueued: while Kueue holds a job in the queue, a
// change of what shapes its pods (resources) is refused by the API server
// with the field named, so the Workload Kueue queued stays the job's true
// request; a change that does not shape the pods (the TTL) is accepted
// and observed without touching the Job or its Workload, and the job is
// admitted in its first run once quota frees.
func TestKueueSpecChangeWhileQueued(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})
	holder, waiter, waiterJob := s.holdAndWait(t)
	wl := s.waitWorkload(t, waiterJob, "pending", func(*unstructured.Unstructured) bool { return true })

	err := s.update(t, waiter, func(tj *trainingv1alpha1.TrainingJob) {
		tj.Spec.Resources.Requests[gpuResource] = resource.MustParse("2")
		tj.Spec.Resources.Accelerators = &commonv1alpha1.Accelerators{Count: 2}
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "resources is immutable") {
		t.Fatalf("changing the resources of a queued job: %v, want it refused as immutable", err)
	}
	t.Logf("resources changed while queued: %v", err)

	if err := s.update(t, waiter, func(tj *trainingv1alpha1.TrainingJob) {
		tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](3600)
	}); err != nil {
		t.Fatalf("changing the TTL of a queued job: %v", err)
	}
	got := s.waitTJ(t, waiter, "the new generation observed, still Queued", func(tj *trainingv1alpha1.TrainingJob) bool {
		return tj.Status.ObservedGeneration == tj.Generation && queued(tj, tjcontroller.ReasonWaiting)
	})
	if got.Generation < 2 {
		t.Fatalf("generation %d after a spec change", got.Generation)
	}
	now := s.waitWorkload(t, waiterJob, "pending", func(*unstructured.Unstructured) bool { return true })
	if now.GetUID() != wl.GetUID() || conditionStatus(now, "QuotaReserved") != "False" {
		t.Errorf("the Workload changed with the TTL: %s -> %s, QuotaReserved %v", wl.GetUID(), now.GetUID(), conditionStatus(now, "QuotaReserved"))
	}
	if n := s.jobWrites(t, waiterJob)[operatorUser]; n != 1 {
		t.Errorf("the operator wrote the queued Job %d times after a TTL change, want once (its creation)", n)
	}

	if err := s.c.Delete(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	job := s.waitJob(t, "waiter-r1", "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	if job.UID != waiterJob.UID {
		t.Errorf("the spec change replaced the queued Job")
	}
	got = s.waitTJ(t, waiter, "Admitted", admitted)
	if got.Status.Run != 1 || got.Spec.RunPolicy.TTLSecondsAfterFinished == nil {
		t.Errorf("after admission: run %d ttl %v", got.Status.Run, got.Spec.RunPolicy.TTLSecondsAfterFinished)
	}
}

// TestKueueUserSuspendWhileQueued: a job suspended by its user while it
// waits in the queue leaves the queue (its Job and Workload go), is
// Suspended without counting a restart, and queues again in a new run
// when resumed, which Kueue admits once quota frees.
func TestKueueUserSuspendWhileQueued(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})
	holder, waiter, waiterJob := s.holdAndWait(t)
	wl := s.waitWorkload(t, waiterJob, "pending", func(*unstructured.Unstructured) bool { return true })

	if err := s.update(t, waiter, func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Suspend = true }); err != nil {
		t.Fatal(err)
	}
	got := s.waitTJ(t, waiter, "Suspended", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSuspended) && tj.Status.Phase == trainingv1alpha1.PhaseSuspended
	})
	if got.Status.RestartCount != 0 || got.Status.Failure != nil || got.Status.Queue != nil {
		t.Errorf("suspended while queued: restarts %d failure %+v queue %+v", got.Status.RestartCount, got.Status.Failure, got.Status.Queue)
	}
	s.waitGone(t, waiterJob)
	s.waitGone(t, wl)
	s.waitTJ(t, holder, "still Admitted", admitted)

	if err := s.update(t, waiter, func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Suspend = false }); err != nil {
		t.Fatal(err)
	}
	next := s.waitJob(t, "waiter-r2", "created suspended", func(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) })
	s.waitTJ(t, waiter, "Queued again", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })
	if err := s.c.Delete(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	s.waitJob(t, next.Name, "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	got = s.waitTJ(t, waiter, "Admitted", admitted)
	if got.Status.RestartCount != 0 || got.Status.Failure != nil {
		t.Errorf("resumed: restarts %d failure %+v", got.Status.RestartCount, got.Status.Failure)
	}
}

// TestKueueLocalQueueRemovedWhileWaiting: the LocalQueue of a waiting job
// is deleted. The job stays Queued (not Failed, not Stalled) and says
// that Kueue knows no such LocalQueue, with no position; the operator
// neither fails nor spins. Once the LocalQueue is created again the job
// gets its place back, and it is admitted when quota frees.
func TestKueueLocalQueueRemovedWhileWaiting(t *testing.T) {
	s := startStackWith(t, stackOptions{visibility: true, operator: harness.Options{QueuePositionRefresh: positionRefresh}})
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})
	holder, waiter, waiterJob := s.holdAndWait(t)
	s.waitPosition(t, waiter, 1)

	lq := kueue.Object("LocalQueue", s.ns, "team-queue", nil)
	if err := s.c.Delete(t.Context(), lq); err != nil {
		t.Fatal(err)
	}
	s.waitGone(t, lq)
	got := s.waitTJ(t, waiter, "Queued, its LocalQueue gone", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return queued(tj, tjcontroller.ReasonWaiting) && position(tj) == 0 && strings.Contains(c.Message, "Kueue knows no LocalQueue team-queue")
	})
	t.Logf("Queued condition without the LocalQueue: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	if conditions.IsTrue(got, commonv1alpha1.ConditionStalled) || got.Status.RestartCount != 0 {
		t.Errorf("a removed LocalQueue: stalled %v restarts %d", conditions.Get(got, commonv1alpha1.ConditionStalled), got.Status.RestartCount)
	}
	wl := s.waitWorkload(t, waiterJob, "pending", func(*unstructured.Unstructured) bool { return true })
	_, reason, msg := condition(wl, "QuotaReserved")
	t.Logf("Kueue's Workload without the LocalQueue: QuotaReserved %s: %s", reason, msg)
	// The operator keeps to its refresh: a few status writes at most, not
	// one per reconcile of a hot loop.
	before := s.op.Writes.Namespace(s.ns).Total()
	time.Sleep(5 * positionRefresh)
	if n := s.op.Writes.Namespace(s.ns).Total() - before; n > 2 {
		t.Errorf("the operator wrote %d times in %s while the LocalQueue was gone", n, 5*positionRefresh)
	}

	kueue.CreateAll(t, s.c, kueue.Object("LocalQueue", s.ns, "team-queue", map[string]any{"spec": map[string]any{"clusterQueue": s.ns + "-team-queue"}}))
	s.waitPosition(t, waiter, 1)
	if err := s.c.Delete(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	job := s.waitJob(t, "waiter-r1", "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	if job.UID != waiterJob.UID {
		t.Errorf("the Job was replaced while its LocalQueue was gone")
	}
	s.waitTJ(t, waiter, "Admitted", admitted)
}
