package kueuecompat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	tjcontroller "github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func queued(tj *trainingv1alpha1.TrainingJob, reason string) bool {
	c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason && tj.Status.Phase == trainingv1alpha1.PhaseQueued &&
		!conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
}

func admitted(tj *trainingv1alpha1.TrainingJob) bool {
	c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == tjcontroller.ReasonAdmitted && tj.Status.Phase != trainingv1alpha1.PhaseQueued
}

// flavored is true when Kueue's admission reached the pod template: the
// flavor's node label and toleration.
func flavored(job *batchv1.Job) bool {
	spec := job.Spec.Template.Spec
	return spec.NodeSelector[flavorLabel] != "" && slices.Contains(spec.Tolerations, flavorToleration)
}

// TestKueueAdmitsWithinQuotaWithoutAFight: Kueue admits a job that fits
// its ClusterQueue, the Job controller then creates every pod at once,
// and neither the operator nor Kueue undoes the other's writes on the Job.
func TestKueueAdmitsWithinQuotaWithoutAFight(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "2"})

	tj := s.trainingJob("fits", "team-queue", 2, 1)
	s.create(t, tj)
	job := s.waitJob(t, "fits-r1", "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	if !flavored(job) {
		t.Errorf("Kueue's flavor is not in the admitted Job's template: nodeSelector %v tolerations %v", job.Spec.Template.Spec.NodeSelector, job.Spec.Template.Spec.Tolerations)
	}
	wl := s.waitWorkload(t, job, "Admitted", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "Admitted") == "True" })
	got := s.waitTJ(t, tj, "Admitted", admitted)
	t.Logf("Queued condition: %+v", conditions.Get(got, trainingv1alpha1.ConditionQueued))

	// Gang admission: the Job controller creates all the run's pods.
	parallelism := int(ptr.Deref(job.Spec.Parallelism, 1))
	testenv.Eventually(t, "the Job controller creates every pod", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOf(ctx, job)
		return len(pods) == parallelism, err
	})

	// The operator's reconciles of the admitted job write nothing on it.
	s.op.Writes.Namespace(s.ns).WaitQuiet(t, 3*time.Second)
	for range 5 {
		if _, err := s.op.Reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
			t.Fatal(err)
		}
	}
	counts := s.jobWrites(t, job)
	t.Logf("writes on Job %s through admission: %v", job.Name, counts)
	if counts[operatorUser] != 1 {
		t.Errorf("the operator wrote the Job %d times, want once (its creation): %v", counts[operatorUser], counts)
	}
	if counts[kueueUser] == 0 {
		t.Errorf("no write of Kueue's on the Job: %v", counts)
	}
	// Nothing moves afterwards: no controller keeps rewriting the Job.
	testenv.Consistently(t, "no further writes on the Job", 5*time.Second, func(context.Context) error {
		if now := s.jobWrites(t, job); !maps.Equal(now, counts) {
			return fmt.Errorf("writes on the Job went on after admission: %v, then %v", counts, now)
		}
		return nil
	})
	if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(job.Spec.Suspend, true) || !flavored(job) {
		t.Errorf("Kueue's admission was undone: suspend %v nodeSelector %v tolerations %v", job.Spec.Suspend, job.Spec.Template.Spec.NodeSelector, job.Spec.Template.Spec.Tolerations)
	}
	if conditionStatus(wl, "Evicted") == "True" {
		t.Errorf("the Workload was evicted: %v", wl.Object["status"])
	}
}

// jobWrites counts the successful writes on a Job's main resource by
// user, from the API server's audit log.
func (s *stack) jobWrites(t *testing.T, job *batchv1.Job) map[string]int {
	t.Helper()
	return s.writesOn(t, "jobs", job.Namespace, job.Name)
}

// writesOn counts the successful writes on one object's main resource by
// user.
func (s *stack) writesOn(t *testing.T, resource, ns, name string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, w := range s.writeLog(t, resource, ns, name) {
		if w.Succeeded() {
			out[w.User]++
		}
	}
	return out
}

// jobWriteLog is every write request on a Job's main resource, refused
// ones (conflicts) included, oldest first.
func (s *stack) jobWriteLog(t *testing.T, job *batchv1.Job) []testenv.AuditedWrite {
	t.Helper()
	return s.writeLog(t, "jobs", job.Namespace, job.Name)
}

// writeLog is every write request on one object's main resource, from
// the API server's audit log.
func (s *stack) writeLog(t *testing.T, resource, ns, name string) []testenv.AuditedWrite {
	t.Helper()
	writes, err := env.AuditedWrites()
	if err != nil {
		t.Fatal(err)
	}
	var out []testenv.AuditedWrite
	for _, w := range writes {
		if w.Resource == resource && w.Namespace == ns && w.Name == name {
			out = append(out, w)
		}
	}
	return out
}

// TestKueueKeepsAJobBeyondQuotaQueued: a job that needs more than its
// ClusterQueue has waits Queued with Kueue's own reason on the
// TrainingJob, and no pod exists before admission.
func TestKueueKeepsAJobBeyondQuotaQueued(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "2"})

	tj := s.trainingJob("too-big", "team-queue", 1, 4)
	s.create(t, tj)
	job := s.waitJob(t, "too-big-r1", "created", func(*batchv1.Job) bool { return true })
	wl := s.waitWorkload(t, job, "QuotaReserved=False", func(wl *unstructured.Unstructured) bool {
		status, _, msg := condition(wl, "QuotaReserved")
		return status == "False" && msg != ""
	})
	_, _, kueueMsg := condition(wl, "QuotaReserved")
	got := s.waitTJ(t, tj, "Queued with Kueue's reason", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return queued(tj, tjcontroller.ReasonWaiting) && c != nil && strings.Contains(c.Message, kueueMsg)
	})
	t.Logf("Queued condition: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	testenv.Consistently(t, "the Job stays suspended without pods", 5*time.Second, func(ctx context.Context) error {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		pods, err := s.podsOf(ctx, job)
		if err != nil {
			return err
		}
		if !ptr.Deref(job.Spec.Suspend, false) || len(pods) != 0 {
			return fmt.Errorf("before admission: suspend %v, %d pods", job.Spec.Suspend, len(pods))
		}
		return nil
	})
	all := &corev1.PodList{}
	if err := s.c.List(t.Context(), all, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 0 {
		t.Errorf("%d pods exist in the namespace before admission", len(all.Items))
	}
}

// TestKueuePreemptsByPriorityAndTheJobResumes: a job of a higher
// WorkloadPriorityClass preempts one that holds the quota; the preempted
// TrainingJob goes back to Queued, recorded as Kueue's eviction and not as
// a failure or a restart, and runs on in the same run once re-admitted.
func TestKueuePreemptsByPriorityAndTheJobResumes(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "2"})
	low, high := s.ns+"-low", s.ns+"-high"
	s.createPriorityClass(t, low, 100)
	s.createPriorityClass(t, high, 1000)

	lowTJ := s.trainingJob("low", "team-queue", 2, 1)
	lowTJ.Labels = map[string]string{trainingv1alpha1.LabelKueuePriorityClass: low}
	s.create(t, lowTJ)
	lowJob := s.waitJob(t, "low-r1", "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	if lowJob.Labels[trainingv1alpha1.LabelKueuePriorityClass] != low {
		t.Fatalf("the Job does not carry the TrainingJob's priority class: %v", lowJob.Labels)
	}
	s.waitTJ(t, lowTJ, "Admitted", admitted)
	testenv.Eventually(t, "the Job controller creates low's pods", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOf(ctx, lowJob)
		return len(pods) == 2, err
	})

	highTJ := s.trainingJob("high", "team-queue", 1, 2)
	highTJ.Labels = map[string]string{trainingv1alpha1.LabelKueuePriorityClass: high}
	s.create(t, highTJ)

	// Kueue preempts the low job: it suspends its Job, and the Job
	// controller removes its pods.
	s.waitWorkload(t, lowJob, "Evicted by preemption", func(wl *unstructured.Unstructured) bool {
		status, reason, _ := condition(wl, "Evicted")
		return status == "True" && reason == "Preempted"
	})
	got := s.waitTJ(t, lowTJ, "Queued after the preemption", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return queued(tj, tjcontroller.ReasonEvicted) && strings.Contains(c.Message, "Preempted")
	})
	t.Logf("preempted: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	if got.Status.Run != 1 || got.Status.RestartCount != 0 || len(got.Status.Runs) != 0 || got.Status.Failure != nil {
		t.Errorf("a preemption changed the runs: run %d restarts %d history %+v failure %+v", got.Status.Run, got.Status.RestartCount, got.Status.Runs, got.Status.Failure)
	}
	if ev := testenv.WaitForEvent(t, s.c, lowTJ, "Evicted"); ev.Type != corev1.EventTypeWarning {
		t.Errorf("Evicted event type %s", ev.Type)
	}
	testenv.Eventually(t, "low's pods are gone", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOf(ctx, lowJob)
		return len(pods) == 0, err
	})
	highJob := s.waitJob(t, "high-r1", "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	s.waitTJ(t, highTJ, "Admitted", admitted)
	// The operator never unsuspends the preempted Job, nor restores what
	// Kueue took out of its template.
	if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(lowJob), lowJob); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(lowJob.Spec.Suspend, false) || flavored(lowJob) {
		t.Errorf("the preempted Job: suspend %v nodeSelector %v tolerations %v", lowJob.Spec.Suspend, lowJob.Spec.Template.Spec.NodeSelector, lowJob.Spec.Template.Spec.Tolerations)
	}
	t.Logf("writes on Job %s through admission and preemption: %v", lowJob.Name, s.jobWrites(t, lowJob))
	if n := s.jobWrites(t, lowJob)[operatorUser]; n != 1 {
		t.Errorf("the operator wrote the preempted Job %d times, want once (its creation)", n)
	}

	// The high job ends; Kueue re-admits the low one, in the same run.
	if err := s.c.Delete(t.Context(), highTJ); err != nil {
		t.Fatal(err)
	}
	s.waitGone(t, highJob)
	readmitted := s.waitJob(t, "low-r1", "re-admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) && flavored(j) })
	if readmitted.UID != lowJob.UID {
		t.Errorf("re-admission replaced the Job")
	}
	got = s.waitTJ(t, lowTJ, "Admitted again", admitted)
	if got.Status.Run != 1 || got.Status.RestartCount != 0 || len(got.Status.Runs) != 0 {
		t.Errorf("after re-admission: run %d restarts %d history %+v", got.Status.Run, got.Status.RestartCount, got.Status.Runs)
	}
	testenv.Eventually(t, "the Job controller recreates low's pods", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOf(ctx, lowJob)
		return len(pods) == 2, err
	})
	t.Logf("writes on Job %s through preemption and re-admission: %v", lowJob.Name, s.jobWrites(t, lowJob))
	for _, w := range s.jobWriteLog(t, lowJob) {
		t.Logf("  %s", w)
	}
}

func (s *stack) waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, obj.GetName()+" is gone", func(ctx context.Context) (bool, error) {
		err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// TestKueueQueuedJobDeletedOrMoved: deleting a queued TrainingJob removes
// its Workload from Kueue; moving a queued TrainingJob to another queue
// moves its Workload, which the other queue admits.
func TestKueueQueuedJobDeletedOrMoved(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "small", quota{cpu: "4", memory: "8Gi", gpu: "0"})
	s.createQueues(t, "big", quota{cpu: "4", memory: "8Gi", gpu: "4"})

	gone := s.trainingJob("gone", "small", 1, 1)
	s.create(t, gone)
	goneJob := s.waitJob(t, "gone-r1", "created", func(*batchv1.Job) bool { return true })
	wl := s.waitWorkload(t, goneJob, "pending", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "QuotaReserved") == "False" })
	s.waitTJ(t, gone, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })
	if err := s.c.Delete(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	s.waitGone(t, wl)

	moved := s.trainingJob("moved", "small", 1, 1)
	s.create(t, moved)
	movedJob := s.waitJob(t, "moved-r1", "created", func(*batchv1.Job) bool { return true })
	s.waitTJ(t, moved, "Queued in small", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })
	testenv.Eventually(t, "move to queue big", func(ctx context.Context) (bool, error) {
		got := &trainingv1alpha1.TrainingJob{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(moved), got); err != nil {
			return false, err
		}
		got.Spec.QueueName = "big"
		err := s.c.Update(ctx, got)
		return err == nil, client.IgnoreNotFound(ignoreConflict(err))
	})
	s.waitWorkload(t, movedJob, "admitted from big", func(wl *unstructured.Unstructured) bool {
		q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
		return q == "big" && conditionStatus(wl, "Admitted") == "True"
	})
	s.waitJob(t, "moved-r1", "admitted", func(j *batchv1.Job) bool {
		return !ptr.Deref(j.Spec.Suspend, true) && j.Labels[trainingv1alpha1.LabelKueueQueueName] == "big"
	})
	s.waitTJ(t, moved, "Admitted", admitted)
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// TestKueueUserSuspendReleasesQuota: suspending an admitted TrainingJob
// ends its run and removes its Job, so Kueue takes the quota back and
// admits the job that waited for it; resumed, the suspended job queues
// again in a new run.
func TestKueueUserSuspendReleasesQuota(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "2"})

	first := s.trainingJob("first", "team-queue", 2, 1)
	s.create(t, first)
	firstJob := s.waitJob(t, "first-r1", "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	s.waitTJ(t, first, "Admitted", admitted)
	wl := s.waitWorkload(t, firstJob, "Admitted", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "Admitted") == "True" })

	waiting := s.trainingJob("waiting", "team-queue", 1, 2)
	s.create(t, waiting)
	s.waitTJ(t, waiting, "Queued for quota", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })

	testenv.Eventually(t, "suspend first", func(ctx context.Context) (bool, error) {
		got := &trainingv1alpha1.TrainingJob{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(first), got); err != nil {
			return false, err
		}
		got.Spec.Suspend = true
		err := s.c.Update(ctx, got)
		return err == nil, ignoreConflict(err)
	})
	got := s.waitTJ(t, first, "Suspended", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSuspended) && tj.Status.Phase == trainingv1alpha1.PhaseSuspended
	})
	if got.Status.RestartCount != 0 || got.Status.Failure != nil {
		t.Errorf("the user's suspend counted: restarts %d failure %+v", got.Status.RestartCount, got.Status.Failure)
	}
	s.waitGone(t, firstJob)
	s.waitGone(t, wl)
	s.waitJob(t, "waiting-r1", "admitted with the released quota", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	s.waitTJ(t, waiting, "Admitted", admitted)

	// Resumed, the first job queues again in its next run.
	testenv.Eventually(t, "resume first", func(ctx context.Context) (bool, error) {
		got := &trainingv1alpha1.TrainingJob{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(first), got); err != nil {
			return false, err
		}
		got.Spec.Suspend = false
		err := s.c.Update(ctx, got)
		return err == nil, ignoreConflict(err)
	})
	s.waitJob(t, "first-r2", "created suspended", func(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) })
	s.waitTJ(t, first, "Queued again", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })
}
