package kueuecompat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	sharedkueue "github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func running(nb *notebooksv1alpha1.Notebook) bool {
	return nb.Status.Phase == notebooksv1alpha1.PhaseRunning && conditions.IsTrue(nb, commonv1alpha1.ConditionReady)
}

func admitted(nb *notebooksv1alpha1.Notebook) bool {
	c := conditions.Get(nb, notebooksv1alpha1.ConditionQueued)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == notebooksv1alpha1.ReasonAdmitted
}

// runningNotebook creates a Notebook (notebookIn), acts out its admitted
// pod and waits until it runs, admitted by Kueue.
func (s *stack) runningNotebook(t *testing.T, name, queue, cpu string, gpus int32) *notebooksv1alpha1.Notebook {
	t.Helper()
	nb := s.notebookIn(name, queue, cpu, gpus)
	s.create(t, nb)
	s.actOutAdmittedPod(t, nb)
	s.waitNotebook(t, nb, "Running, admitted", func(nb *notebooksv1alpha1.Notebook) bool { return running(nb) && admitted(nb) })
	return nb
}

// queued accepts a Notebook that waits Queued with Kueue's own reason and
// message, as its Workload states them.
func (s *stack) queued(t *testing.T, nb *notebooksv1alpha1.Notebook) *notebooksv1alpha1.Notebook {
	t.Helper()
	var wlReason, wlMessage string
	got := s.waitNotebook(t, nb, "Queued with Kueue's reason", func(got *notebooksv1alpha1.Notebook) bool {
		c := conditions.Get(got, notebooksv1alpha1.ConditionQueued)
		if got.Status.Phase != notebooksv1alpha1.PhaseQueued || c == nil || c.Status != metav1.ConditionTrue {
			return false
		}
		wl, err := s.workloadOf(t.Context(), got)
		if err != nil || wl == nil {
			return false
		}
		st := sharedkueue.Observe(wl)
		wlReason, wlMessage = st.Reason, st.Message
		return st.Message != "" && c.Reason == st.Reason && strings.Contains(c.Message, st.Message)
	})
	if !strings.Contains(wlMessage, "insufficient") || !strings.Contains(wlMessage, "quota") {
		t.Errorf("Kueue's wait %s: %q does not say why", wlReason, wlMessage)
	}
	if !conditions.IsTrue(got, commonv1alpha1.ConditionReconciling) || conditions.IsTrue(got, commonv1alpha1.ConditionStalled) {
		t.Errorf("a queued Notebook is in progress, not stalled: %+v", got.Status.Conditions)
	}
	pod, err := s.pod(t.Context(), got)
	if err != nil {
		t.Fatal(err)
	}
	if pod != nil && !gated(pod) {
		t.Errorf("the pod of a queued Notebook is not gated: %+v", pod.Spec.SchedulingGates)
	}
	testenv.WaitForEvent(t, s.c, got, notebooksv1alpha1.ConditionQueued)
	return got
}

// noFight checks the writes on a Notebook's StatefulSet: Kueue never
// writes it (its webhook mutates the operator's own requests), and no
// write of the operator's is refused (Kueue's webhook refuses a scale-up
// while it still releases the previous run).
func (s *stack) noFight(t *testing.T, nb *notebooksv1alpha1.Notebook, maxOperatorWrites int) {
	t.Helper()
	writes := s.writesOn(t, "statefulsets", nb.Name)
	status := s.writesOn(t, "statefulsets/status", nb.Name)
	pods := s.writesOn(t, "pods", nb.Name+"-0")
	t.Logf("writes on StatefulSet %s: %v; on its status: %v; on pod %s-0: %v", nb.Name, writes, status, nb.Name, pods)
	if writes[kueueUser] != 0 {
		t.Errorf("Kueue wrote the StatefulSet %d times", writes[kueueUser])
	}
	if writes[operatorUser] == 0 || writes[operatorUser] > maxOperatorWrites {
		t.Errorf("the operator wrote the StatefulSet %d times, want 1..%d", writes[operatorUser], maxOperatorWrites)
	}
	if pods[operatorUser] != 0 {
		t.Errorf("the operator wrote the pod %d times", pods[operatorUser])
	}
	if refused := s.refusedWritesOn(t, "statefulsets", nb.Name); len(refused) > 0 {
		t.Errorf("refused writes on the StatefulSet: %v", refused)
	}
}

// TestKueueQueuesANotebookBeyondQuotaAndStopReleasesIt: with quota for one
// notebook, the first runs, the second waits Queued with Kueue's own
// reason and message (its pod gated), stopping the first releases the
// quota and the second runs, and starting the first again queues it.
func TestKueueQueuesANotebookBeyondQuotaAndStopReleasesIt(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team", "1", "0")

	first := s.runningNotebook(t, "first", "team", "1", 0)

	second := s.notebookIn("second", "team", "1", 0)
	s.create(t, second)
	s.queued(t, second)

	// The user stops the first: its quota goes to the second.
	s.updateNotebook(t, first, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = true })
	got := s.waitNotebook(t, first, "Suspended", func(nb *notebooksv1alpha1.Notebook) bool {
		return nb.Status.Phase == notebooksv1alpha1.PhaseSuspended
	})
	if c := conditions.Get(got, notebooksv1alpha1.ConditionQueued); c != nil {
		t.Errorf("a stopped Notebook keeps %+v", c)
	}
	s.actOutTermination(t, first)
	s.waitReleased(t, got)
	s.actOutAdmittedPod(t, second)
	s.waitNotebook(t, second, "Running once the first stopped", func(nb *notebooksv1alpha1.Notebook) bool { return running(nb) && admitted(nb) })

	// Started again, the first waits for the quota the second now holds.
	s.updateNotebook(t, first, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = false })
	s.queued(t, first)

	// Kueue evicts neither while the first waits.
	testenv.Consistently(t, "the second keeps running", 3*time.Second, func(ctx context.Context) error {
		nb := &notebooksv1alpha1.Notebook{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(second), nb); err != nil {
			return err
		}
		if !running(nb) {
			return fmt.Errorf("phase %s, conditions %+v", nb.Status.Phase, nb.Status.Conditions)
		}
		return nil
	})
	s.noFight(t, first, 4)
	s.noFight(t, second, 2)
}

// TestKueueIdleCullOfAGPUNotebookFreesTheGPU: a GPU notebook holds the
// queue's one GPU; a Job (the kind of child a TrainingJob's native backend
// makes) waits for it; culling the idle notebook releases the GPU and
// Kueue admits the Job; starting the notebook again queues it.
func TestKueueIdleCullOfAGPUNotebookFreesTheGPU(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "gpu", "4", "1")

	nb := s.runningNotebook(t, "gpu-nb", "gpu", "1", 1)

	job := gpuJob(s.ns, "trainer", "gpu")
	s.create(t, job)
	testenv.Eventually(t, "the Job waits for the GPU", func(ctx context.Context) (bool, error) {
		wls, err := sharedkueue.WorkloadsOf(ctx, s.c, s.ns, job.UID)
		if err != nil || len(wls) == 0 {
			return false, err
		}
		return strings.Contains(sharedkueue.Observe(&wls[0]).Message, "insufficient"), nil
	})

	// Idle since t0 (the prober's answer); the default idle timeout is an
	// hour with a warning ten minutes before.
	s.clock.SetTime(t0.Add(55 * time.Minute))
	s.reconcile(t, nb)
	testenv.Eventually(t, "the operator's cache has the cull deadline", func(ctx context.Context) (bool, error) {
		cached := &notebooksv1alpha1.Notebook{}
		err := s.r.Client.Get(ctx, client.ObjectKeyFromObject(nb), cached)
		return err == nil && cached.Status.CullDeadline != nil, err
	})
	s.clock.SetTime(t0.Add(71 * time.Minute))
	s.reconcile(t, nb)
	got := s.waitNotebook(t, nb, "Culled", func(nb *notebooksv1alpha1.Notebook) bool {
		return nb.Status.Phase == notebooksv1alpha1.PhaseCulled
	})
	if c := conditions.Get(got, notebooksv1alpha1.ConditionQueued); c != nil {
		t.Errorf("a culled Notebook keeps %+v", c)
	}
	s.actOutTermination(t, nb)
	s.waitReleased(t, got)
	testenv.Eventually(t, "Kueue admits the Job with the freed GPU", func(ctx context.Context) (bool, error) {
		err := s.c.Get(ctx, client.ObjectKeyFromObject(job), job)
		return err == nil && !ptr.Deref(job.Spec.Suspend, true), err
	})

	// Started again, the notebook waits for the GPU the Job now holds.
	s.updateNotebook(t, nb, func(nb *notebooksv1alpha1.Notebook) {
		nb.Annotations = map[string]string{notebooksv1alpha1.AnnotationRestart: "1"}
	})
	s.queued(t, nb)
	s.noFight(t, nb, 4)
}

// TestKueueNotebookStoppedAndStartedAtOnce: a Notebook started again
// while its previous pod is still terminating is not refused by Kueue's
// StatefulSet webhook (which forbids that scale-up): the operator waits,
// saying so, until Kueue released the previous run, then the Notebook is
// admitted and runs again.
func TestKueueNotebookStoppedAndStartedAtOnce(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team", "2", "0")
	nb := s.runningNotebook(t, "again", "team", "1", 0)

	// The pod stays terminating until the test plays the kubelet.
	s.updateNotebook(t, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = true })
	testenv.Eventually(t, "the pod is terminating", func(ctx context.Context) (bool, error) {
		pod, err := s.pod(ctx, nb)
		return pod != nil && !pod.DeletionTimestamp.IsZero(), err
	})
	s.updateNotebook(t, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = false })
	s.waitNotebook(t, nb, "waiting for Kueue's release", func(nb *notebooksv1alpha1.Notebook) bool {
		c := conditions.Get(nb, commonv1alpha1.ConditionReconciling)
		return !nb.Spec.Suspend && c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "Kueue to release")
	})
	testenv.Consistently(t, "no scale-up is refused", 3*time.Second, func(context.Context) error {
		if refused := s.refusedWritesOn(t, "statefulsets", nb.Name); len(refused) > 0 {
			return fmt.Errorf("refused writes on the StatefulSet: %v", refused)
		}
		return nil
	})

	s.actOutTermination(t, nb)
	s.actOutAdmittedPod(t, nb)
	s.waitNotebook(t, nb, "Running again, admitted", func(nb *notebooksv1alpha1.Notebook) bool { return running(nb) && admitted(nb) })
	s.noFight(t, nb, 3)
}

// TestKueueRefusedTemplateChangeIsVisible: Kueue's StatefulSet webhook
// refuses a change of the pod's requests while it manages the StatefulSet;
// the Notebook says so (Stalled with the webhook's message) instead of
// retrying in silence.
func TestKueueRefusedTemplateChangeIsVisible(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team", "4", "0")
	nb := s.runningNotebook(t, "resize", "team", "1", 0)

	s.updateNotebook(t, nb, func(nb *notebooksv1alpha1.Notebook) {
		nb.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	})
	got := s.waitNotebook(t, nb, "Stalled with Kueue's refusal", func(nb *notebooksv1alpha1.Notebook) bool {
		c := conditions.Get(nb, commonv1alpha1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == commonv1alpha1.ReasonChildRejected &&
			strings.Contains(c.Message, "vstatefulset.kb.io")
	})
	t.Logf("Stalled: %s", conditions.Get(got, commonv1alpha1.ConditionStalled).Message)
	testenv.WaitForEvent(t, s.c, got, commonv1alpha1.ReasonChildRejected)
}

// waitReleased waits until the Workload of the stopped Notebook is gone,
// and with it the quota it held; it shows the Workload if it stays.
func (s *stack) waitReleased(t *testing.T, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	var wl *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, testenv.EventuallyTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		wl, err = s.workloadOf(ctx, nb)
		return wl == nil, err
	})
	if err != nil {
		b, _ := json.Marshal(wl)
		t.Fatalf("the Workload of stopped Notebook %s stays: %v\n%s", nb.Name, err, b)
	}
}

// reconcile runs one reconcile directly, as a timed culling check does:
// it asks for a probe, and the answer brings the Notebook back to the
// operator, which decides on it.
func (s *stack) reconcile(t *testing.T, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	if _, err := s.r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(nb)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

// gpuJob is a queued Job whose one pod needs a GPU, shaped as the
// TrainingJob operator's native backend makes a run of one pod
// (operators/trainingjob/internal/nativejob, which this module cannot
// import): created suspended with the queue-name label, Indexed, one
// completion, no retries. Kueue tracks it through its batch/job
// integration, as it tracks a native TrainingJob's run.
func gpuJob(ns, name, queue string) *batchv1.Job {
	gpu := corev1.ResourceList{gpuResource: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{sharedkueue.QueueLabel: queue}},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To[int32](1),
			Parallelism:    ptr.To[int32](1),
			BackoffLimit:   ptr.To[int32](0),
			Suspend:        ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "train", Image: "train", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}},
			}},
		},
	}
}
