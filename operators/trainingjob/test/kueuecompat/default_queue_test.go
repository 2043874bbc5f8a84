package kueuecompat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	tjcontroller "github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestKueueDefaultLocalQueueIsRespected: in a namespace with a LocalQueue
// named default, Kueue puts the Job of a TrainingJob without queueName in
// it (LocalQueueDefaulting). The operator takes that as the job's queue:
// it neither removes the label nor unsuspends the Job, the TrainingJob
// says it waits in LocalQueue default, and it runs once Kueue admits it.
func TestKueueDefaultLocalQueueIsRespected(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "default", quota{cpu: "4", memory: "8Gi", gpu: "1"})

	big := s.trainingJob("big", "", 1, 2)
	s.create(t, big)
	job := s.waitJob(t, "big-r1", "created", func(*batchv1.Job) bool { return true })
	if q := job.Labels[trainingv1alpha1.LabelKueueQueueName]; q != "default" || !ptr.Deref(job.Spec.Suspend, false) {
		t.Fatalf("Kueue did not default the Job's queue: label %q suspend %v", q, ptr.Deref(job.Spec.Suspend, false))
	}
	s.waitWorkload(t, job, "QuotaReserved=False", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "QuotaReserved") == "False" })
	got := s.waitTJ(t, big, "Queued in LocalQueue default", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return queued(tj, tjcontroller.ReasonWaiting) && strings.Contains(c.Message, "LocalQueue default") &&
			tj.Status.Queue != nil && tj.Status.Queue.LocalQueue == "default"
	})
	t.Logf("Queued condition: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	testenv.Consistently(t, "the Job stays suspended in queue default, written once by the operator", 5*time.Second, func(ctx context.Context) error {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		pods, err := s.podsOf(ctx, job)
		if err != nil {
			return err
		}
		if !ptr.Deref(job.Spec.Suspend, false) || len(pods) != 0 || job.Labels[trainingv1alpha1.LabelKueueQueueName] != "default" {
			return fmt.Errorf("before admission: suspend %v, %d pods, labels %v", job.Spec.Suspend, len(pods), job.Labels)
		}
		if n := s.operatorWriteAttempts(t, job); n > 1 {
			return fmt.Errorf("the operator wrote (or tried to write) the Job %d times, want once (its creation): %v", n, s.jobWriteLog(t, job))
		}
		return nil
	})

	// A job that fits the quota is admitted from the default queue and runs.
	fits := s.trainingJob("fits", "", 1, 1)
	s.create(t, fits)
	fitsJob := s.waitJob(t, "fits-r1", "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) && flavored(j) })
	s.waitTJ(t, fits, "Admitted", admitted)
	testenv.Eventually(t, "the Job controller creates the pod", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOf(ctx, fitsJob)
		return len(pods) == 1, err
	})
	if n := s.jobWrites(t, fitsJob)[operatorUser]; n != 1 {
		t.Errorf("the operator wrote the admitted Job %d times, want once (its creation)", n)
	}
}

// operatorWriteAttempts counts the operator's write requests on a Job,
// the refused ones included.
func (s *stack) operatorWriteAttempts(t *testing.T, job *batchv1.Job) int {
	t.Helper()
	n := 0
	for _, w := range s.jobWriteLog(t, job) {
		if w.User == operatorUser {
			n++
		}
	}
	return n
}

// TestKueueUnqueuedJobLeavesNoWorkload: a waiting job taken out of its
// queue (queueName set to "") runs outside Kueue, and no Workload of its
// Job is left for Kueue to admit later: that Workload would hold the
// ClusterQueue's quota for a job Kueue does not run.
func TestKueueUnqueuedJobLeavesNoWorkload(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})

	a := s.trainingJob("a", "team-queue", 1, 1)
	s.create(t, a)
	s.waitTJ(t, a, "Admitted", admitted)
	b := s.trainingJob("b", "team-queue", 1, 1)
	s.create(t, b)
	bJob := s.waitJob(t, "b-r1", "created", func(*batchv1.Job) bool { return true })
	s.waitWorkload(t, bJob, "pending", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "QuotaReserved") == "False" })
	s.waitTJ(t, b, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })

	s.setQueue(t, b, "")
	s.waitJob(t, "b-r1", "unsuspended outside Kueue", func(j *batchv1.Job) bool {
		_, labelled := j.Labels[trainingv1alpha1.LabelKueueQueueName]
		return !ptr.Deref(j.Spec.Suspend, true) && !labelled
	})
	testenv.Eventually(t, "b's Workload is gone", func(ctx context.Context) (bool, error) {
		wl, err := s.workloadOf(ctx, bJob)
		return wl == nil, err
	})

	// The quota a held is Kueue's to give to the next job of the queue.
	if err := s.c.Delete(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	c := s.trainingJob("c", "team-queue", 1, 1)
	s.create(t, c)
	s.waitTJ(t, c, "Admitted", admitted)
	if wl, err := s.workloadOf(t.Context(), bJob); err != nil || wl != nil {
		t.Errorf("b's Job has a Workload again (%v): %v", err, wl)
	}
}

// TestKueueUnqueuedJobMovesToTheDefaultQueue: in a namespace with a
// default LocalQueue, Kueue refuses taking a job out of every queue; a
// waiting job whose queueName is removed moves to the default LocalQueue,
// as one created without a queue would, without a fight.
func TestKueueUnqueuedJobMovesToTheDefaultQueue(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "0"})
	s.createQueues(t, "default", quota{cpu: "4", memory: "8Gi", gpu: "1"})

	tj := s.trainingJob("moved", "team-queue", 1, 1)
	s.create(t, tj)
	job := s.waitJob(t, "moved-r1", "created", func(*batchv1.Job) bool { return true })
	s.waitTJ(t, tj, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })
	s.setQueue(t, tj, "")
	s.waitWorkload(t, job, "admitted from the default queue", func(wl *unstructured.Unstructured) bool {
		q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
		return q == "default" && conditionStatus(wl, "Admitted") == "True"
	})
	got := s.waitTJ(t, tj, "Admitted from the default queue", func(tj *trainingv1alpha1.TrainingJob) bool {
		return admitted(tj) && strings.Contains(conditions.Get(tj, trainingv1alpha1.ConditionQueued).Message, "LocalQueue default, Kueue's default for the namespace")
	})
	t.Logf("Queued condition: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	if n := s.operatorWriteAttempts(t, job); n > 3 {
		t.Errorf("the operator wrote (or tried to write) the Job %d times, want its creation, the refused removal of the queue and the move to default: %v", n, s.jobWriteLog(t, job))
	}
}

// TestKueueQueueNamedDefaultRemovedRunsTheJob: a job the user queued in a
// LocalQueue named default, in a namespace that has none (Kueue keeps it
// waiting forever), runs outside Kueue once its queueName is removed: the
// label came from its spec, not from Kueue's default LocalQueue, so the
// operator takes it off, releases its Workload, and unsuspends the Job.
func TestKueueQueueNamedDefaultRemovedRunsTheJob(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})

	tj := s.trainingJob("misqueued", "default", 1, 1)
	s.create(t, tj)
	job := s.waitJob(t, "misqueued-r1", "created", func(*batchv1.Job) bool { return true })
	if q := job.Labels[trainingv1alpha1.LabelKueueQueueName]; q != "default" || !ptr.Deref(job.Spec.Suspend, false) {
		t.Fatalf("the Job must wait suspended in queue default: label %q suspend %v", q, ptr.Deref(job.Spec.Suspend, false))
	}
	s.waitWorkload(t, job, "pending in a LocalQueue that does not exist", func(wl *unstructured.Unstructured) bool {
		q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
		return q == "default" && conditionStatus(wl, "QuotaReserved") == "False"
	})
	got := s.waitTJ(t, tj, "Queued in queue default", func(tj *trainingv1alpha1.TrainingJob) bool {
		return queued(tj, tjcontroller.ReasonWaiting) && tj.Status.Queue != nil && tj.Status.Queue.LocalQueue == "default"
	})
	if msg := conditions.Get(got, trainingv1alpha1.ConditionQueued).Message; strings.Contains(msg, "Kueue's default") {
		t.Errorf("the user named the queue, Kueue did not choose it: %s", msg)
	}

	s.setQueue(t, tj, "")
	s.waitJob(t, "misqueued-r1", "unsuspended outside Kueue", func(j *batchv1.Job) bool {
		_, labelled := j.Labels[trainingv1alpha1.LabelKueueQueueName]
		return !ptr.Deref(j.Spec.Suspend, true) && !labelled
	})
	testenv.Eventually(t, "the Job controller creates the pod", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOf(ctx, job)
		return len(pods) == 1, err
	})
	testenv.Eventually(t, "the Job's Workload is gone", func(ctx context.Context) (bool, error) {
		wl, err := s.workloadOf(ctx, job)
		return wl == nil, err
	})
	s.waitTJ(t, tj, "no longer Queued", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.Get(tj, trainingv1alpha1.ConditionQueued) == nil && tj.Status.Queue == nil
	})
	if n := s.operatorWriteAttempts(t, job); n > 3 {
		t.Errorf("the operator wrote (or tried to write) the Job %d times, want its creation, the removal of the queue and the unsuspension: %v", n, s.jobWriteLog(t, job))
	}
}

// TestKueueQueueNamedDefaultRemovedStaysInTheDefaultQueue: in a namespace
// with a default LocalQueue, a waiting job whose queueName: default is
// removed stays there, now by Kueue's rule: Kueue refuses taking the label
// off once, and the operator neither tries again nor unsuspends the Job,
// and says that the queue is Kueue's default.
func TestKueueQueueNamedDefaultRemovedStaysInTheDefaultQueue(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "default", quota{cpu: "4", memory: "8Gi", gpu: "1"})

	// Two accelerators never fit the queue's one: the Job waits.
	tj := s.trainingJob("named", "default", 1, 2)
	s.create(t, tj)
	job := s.waitJob(t, "named-r1", "created", func(*batchv1.Job) bool { return true })
	s.waitWorkload(t, job, "QuotaReserved=False", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "QuotaReserved") == "False" })
	s.waitTJ(t, tj, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })

	s.setQueue(t, tj, "")
	got := s.waitTJ(t, tj, "Queued in Kueue's default LocalQueue", func(tj *trainingv1alpha1.TrainingJob) bool {
		return queued(tj, tjcontroller.ReasonWaiting) && tj.Status.Queue != nil && tj.Status.Queue.LocalQueue == "default" &&
			strings.Contains(conditions.Get(tj, trainingv1alpha1.ConditionQueued).Message, "LocalQueue default, Kueue's default for the namespace")
	})
	t.Logf("Queued condition: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	testenv.Consistently(t, "the Job stays suspended in queue default, without a fight", 5*time.Second, func(ctx context.Context) error {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		if !ptr.Deref(job.Spec.Suspend, false) || job.Labels[trainingv1alpha1.LabelKueueQueueName] != "default" {
			return fmt.Errorf("suspend %v, labels %v", job.Spec.Suspend, job.Labels)
		}
		if n := s.operatorWriteAttempts(t, job); n > 3 {
			return fmt.Errorf("the operator wrote (or tried to write) the Job %d times, want its creation, the refused removal of the queue and the move to default: %v", n, s.jobWriteLog(t, job))
		}
		return nil
	})
}

// setQueue sets a TrainingJob's queueName.
func (s *stack) setQueue(t *testing.T, tj *trainingv1alpha1.TrainingJob, queue string) {
	t.Helper()
	testenv.Eventually(t, "set queueName of "+tj.Name+" to "+queue, func(ctx context.Context) (bool, error) {
		got := &trainingv1alpha1.TrainingJob{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, err
		}
		got.Spec.QueueName = queue
		err := s.c.Update(ctx, got)
		return err == nil, ignoreConflict(err)
	})
}
