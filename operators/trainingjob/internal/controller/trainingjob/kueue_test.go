package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// kueueFlavor is what Kueue injects into the pod templates when it admits
// a job to a flavor.
var (
	kueueSelector   = map[string]string{"cloud.example.com/flavor": "spot-a100"}
	kueueToleration = corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
)

// kueueAdmit acts out Kueue admitting a job: it injects the flavor's
// nodeSelector and tolerations into every pod template and unsuspends the
// job, in one update, as Kueue's job reconciler does (internal/kueuecompat
// counts that one write with the real Kueue on a native Job).
func kueueAdmit(t *testing.T, c client.Client, job *kubeflowv1.PyTorchJob) {
	t.Helper()
	updateJob(t, c, job, "Kueue admits "+job.Name, func() {
		for _, rs := range job.Spec.PyTorchReplicaSpecs {
			spec := &rs.Template.Spec
			if spec.NodeSelector == nil {
				spec.NodeSelector = map[string]string{}
			}
			for k, v := range kueueSelector {
				spec.NodeSelector[k] = v
			}
			spec.Tolerations = append(spec.Tolerations, kueueToleration)
		}
		job.Spec.RunPolicy.Suspend = ptr.To(false)
	})
}

// updateJob updates a job as another controller does: read, change,
// write, again on a conflict.
func updateJob(t *testing.T, c client.Client, job *kubeflowv1.PyTorchJob, what string, mutate func()) {
	t.Helper()
	testenv.Eventually(t, what, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		mutate()
		err := c.Update(ctx, job)
		return err == nil, ignoreConflict(err)
	})
}

// kueueEvict acts out Kueue evicting an admitted job (preemption by a
// higher-priority workload, or its queue's quota shrinking): it suspends
// the job and restores the pod templates; Kubeflow then deletes the pods
// and reports the job suspended.
func kueueEvict(t *testing.T, c client.Client, job *kubeflowv1.PyTorchJob, pods map[kubeflowv1.ReplicaType]*corev1.Pod) {
	t.Helper()
	updateJob(t, c, job, "Kueue evicts "+job.Name, func() {
		for _, rs := range job.Spec.PyTorchReplicaSpecs {
			spec := &rs.Template.Spec
			for k := range kueueSelector {
				delete(spec.NodeSelector, k)
			}
			spec.Tolerations = spec.Tolerations[:len(spec.Tolerations)-1]
		}
		job.Spec.RunPolicy.Suspend = ptr.To(true)
	})
	for _, p := range pods {
		if err := c.Delete(t.Context(), p); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionFalse, "PyTorchJobSuspended", "")
		jobCond(s, kubeflowv1.JobSuspended, corev1.ConditionTrue, "PyTorchJobSuspended", "suspended")
		s.StartTime = nil
	})
}

func queuedStatus(tj *trainingv1alpha1.TrainingJob, reason string) bool {
	c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason && tj.Status.Phase == trainingv1alpha1.PhaseQueued &&
		conditions.IsTrue(tj, commonv1alpha1.ConditionReconciling) && !conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
}

func TestKueueAdmitsEvictsAndTheUserSuspends(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := checkpointed(ns, "queued", 2, 3, 0)
	tj.Spec.QueueName = "team-a"
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}

	// Created suspended, submitted to the queue.
	job := waitPyTorchJob(t, c, ns, "queued-r1")
	if !ptr.Deref(job.Spec.RunPolicy.Suspend, false) || job.Labels[trainingv1alpha1.LabelKueueQueueName] != "team-a" {
		t.Fatalf("the job must be created suspended with the queue label: suspend %v labels %v", job.Spec.RunPolicy.Suspend, job.Labels)
	}
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobCreated, corev1.ConditionTrue, "PyTorchJobCreated", "created")
		jobCond(s, kubeflowv1.JobSuspended, corev1.ConditionTrue, "PyTorchJobSuspended", "suspended")
	})
	waitTJ(t, c, tj, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queuedStatus(tj, ReasonWaiting) })
	testenv.WaitForEvent(t, c, tj, "Queued")

	// Kueue admits it into a flavor.
	kueueAdmit(t, c, job)
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobSuspended, corev1.ConditionFalse, "PyTorchJobResumed", "")
	})
	pods := startPods(t, c, job)
	got := waitTJ(t, c, tj, "admitted and running", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonAdmitted && conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	if got.Status.Phase != trainingv1alpha1.PhaseRunning {
		t.Errorf("phase %s", got.Status.Phase)
	}
	testenv.WaitForEvent(t, c, tj, "Admitted")
	if n := sampleCount(t, op.reconciler.Metrics.QueueWait.WithLabelValues(ns, "team-a")); n != 1 {
		t.Errorf("queue_wait_seconds{namespace=%s} has %d observations, want 1", ns, n)
	}

	// Reconciling again never reverts what Kueue injected, and never
	// writes the job at all.
	settle(t, c, op, ns, tj, job)
	op.writes.Reset()
	for range 5 {
		if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
			t.Fatal(err)
		}
	}
	if w := op.writes.Namespace(ns); w.Count("patch", "pytorchjobs")+w.Count("update", "pytorchjobs") != 0 {
		t.Errorf("the operator wrote the admitted job: %s", w)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	for role, rs := range job.Spec.PyTorchReplicaSpecs {
		if rs.Template.Spec.NodeSelector["cloud.example.com/flavor"] != "spot-a100" || !hasToleration(rs.Template.Spec.Tolerations, kueueToleration) {
			t.Errorf("%s template lost Kueue's injected fields: %v %v", role, rs.Template.Spec.NodeSelector, rs.Template.Spec.Tolerations)
		}
		// The operator's own scheduling fields are still there too.
		if rs.Template.Spec.NodeSelector["gpu"] != "a100" {
			t.Errorf("%s template lost the accelerator's node selector: %v", role, rs.Template.Spec.NodeSelector)
		}
	}
	if ptr.Deref(job.Spec.RunPolicy.Suspend, true) {
		t.Error("the operator re-suspended an admitted job")
	}

	// The queue cannot change while admitted.
	got, err := getTJ(t.Context(), c, tj)
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.QueueName = "team-b"
	if err := c.Update(t.Context(), got); err == nil || !strings.Contains(err.Error(), "spec.queueName can change only while the job waits in its queue") {
		t.Errorf("changing the queue of an admitted job: %v", err)
	}

	// Kueue evicts it: Queued again, not a failure, not a restart.
	kueueEvict(t, c, job, pods)
	got = waitTJ(t, c, tj, "Queued after the eviction", func(tj *trainingv1alpha1.TrainingJob) bool { return queuedStatus(tj, ReasonEvicted) })
	if got.Status.RestartCount != 0 || got.Status.Run != 1 || len(got.Status.Runs) != 0 {
		t.Errorf("an eviction changed the runs: run %d restarts %d history %+v", got.Status.Run, got.Status.RestartCount, got.Status.Runs)
	}
	if ev := testenv.WaitForEvent(t, c, tj, "Evicted"); ev.Type != corev1.EventTypeWarning {
		t.Errorf("Evicted event type %s", ev.Type)
	}
	if diff := cmp.Diff([]string{"queued-r1"}, jobsOf(t, c, tj)); diff != "" {
		t.Errorf("Kubeflow jobs (-want +got):\n%s", diff)
	}
	// While it waits, the queue may change; the job follows.
	setSpec(t, c, tj, func(spec *trainingv1alpha1.TrainingJobSpec) { spec.QueueName = "team-b" })
	testenv.Eventually(t, "the queue label follows", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), job)
		return job.Labels[trainingv1alpha1.LabelKueueQueueName] == "team-b", err
	})

	// Readmitted, it runs again in the same run.
	kueueAdmit(t, c, job)
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobSuspended, corev1.ConditionFalse, "PyTorchJobResumed", "")
	})
	startPods(t, c, job)
	waitTJ(t, c, tj, "running again", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning) && tj.Status.Run == 1
	})

	// The user suspends it: the run ends and its job goes, so Kueue gets
	// the quota back; nothing is counted as a restart.
	setSpec(t, c, tj, func(s *trainingv1alpha1.TrainingJobSpec) { s.Suspend = true })
	got = waitTJ(t, c, tj, "Suspended", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSuspended) && tj.Status.Phase == trainingv1alpha1.PhaseSuspended
	})
	if got.Status.Run != 2 || got.Status.RestartCount != 0 || len(got.Status.Runs) != 1 || got.Status.Runs[0].Reason != ReasonSuspended {
		t.Errorf("run %d restarts %d history %+v, want run 1 ended as Suspended", got.Status.Run, got.Status.RestartCount, got.Status.Runs)
	}
	testenv.WaitGone(t, c, job)
	// No job may exist while a queued job is suspended.
	consistentlyJobs(t, c, tj, nil)

	// Resumed: the next run queues again and resumes from the checkpoint.
	setSpec(t, c, tj, func(s *trainingv1alpha1.TrainingJobSpec) { s.Suspend = false })
	job2 := waitPyTorchJob(t, c, ns, "queued-r2")
	if !ptr.Deref(job2.Spec.RunPolicy.Suspend, false) || job2.Labels[trainingv1alpha1.LabelKueueQueueName] != "team-b" {
		t.Errorf("run 2 must queue again: suspend %v labels %v", job2.Spec.RunPolicy.Suspend, job2.Labels)
	}
	if env := envOf(job2.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Spec.Containers[0]); env["MLPLATFORM_RESUME"] != "true" || env["MLPLATFORM_RESTART_COUNT"] != "0" {
		t.Errorf("run 2 env %v", env)
	}
	waitTJ(t, c, tj, "Queued for run 2", func(tj *trainingv1alpha1.TrainingJob) bool {
		return queuedStatus(tj, ReasonWaiting) && !conditions.IsTrue(tj, commonv1alpha1.ConditionSuspended)
	})
}

// TestQueuedJobCreatedSuspendedWaitsWithoutAJob: a queued job the user
// creates suspended holds no place in the queue until resumed.
func TestQueuedJobCreatedSuspendedWaitsWithoutAJob(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := newTrainingJob(ns, "later", 1)
	tj.Spec.QueueName = "team-a"
	tj.Spec.Suspend = true
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	waitTJ(t, c, tj, "Suspended", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSuspended) && tj.Status.Phase == trainingv1alpha1.PhaseSuspended
	})
	// No job may exist for a suspended queued TrainingJob.
	consistentlyJobs(t, c, tj, nil)
	setSpec(t, c, tj, func(s *trainingv1alpha1.TrainingJobSpec) { s.Suspend = false })
	job := waitPyTorchJob(t, c, ns, "later-r1")
	if !ptr.Deref(job.Spec.RunPolicy.Suspend, false) {
		t.Error("the queued job must be created suspended, for Kueue to admit")
	}
}

// sampleCount is the number of observations of a histogram.
func sampleCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	m := &dto.Metric{}
	if err := o.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func hasToleration(ts []corev1.Toleration, want corev1.Toleration) bool {
	for _, t := range ts {
		if t == want {
			return true
		}
	}
	return false
}

func setSpec(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob, mutate func(*trainingv1alpha1.TrainingJobSpec)) {
	t.Helper()
	testenv.Eventually(t, "update "+tj.Name, func(ctx context.Context) (bool, error) {
		got, err := getTJ(ctx, c, tj)
		if err != nil {
			return false, err
		}
		mutate(&got.Spec)
		err = c.Update(ctx, got)
		return err == nil, ignoreConflict(err)
	})
}

// TestQueueRemovedWhileWaiting: a job taken out of its queue before
// admission loses the label first and then runs without Kueue. So does one
// the user queued in a LocalQueue named default, in a namespace without
// one (it would wait forever): its label came from its spec, not from
// Kueue's default LocalQueue.
func TestQueueRemovedWhileWaiting(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	for name, queue := range map[string]string{"dequeued": "team-a", "misqueued": "default"} {
		t.Run(queue, func(t *testing.T) {
			tj := newTrainingJob(ns, name, 1)
			tj.Spec.QueueName = queue
			if err := c.Create(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
			job := waitPyTorchJob(t, c, ns, name+"-r1")
			if !ptr.Deref(job.Spec.RunPolicy.Suspend, false) || job.Labels[trainingv1alpha1.LabelKueueQueueName] != queue {
				t.Fatalf("the job must be created suspended in queue %s: suspend %v labels %v", queue, job.Spec.RunPolicy.Suspend, job.Labels)
			}
			got := waitTJ(t, c, tj, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool {
				return queuedStatus(tj, ReasonWaiting) && tj.Status.Queue != nil && tj.Status.Queue.LocalQueue == queue
			})
			if msg := conditions.Get(got, trainingv1alpha1.ConditionQueued).Message; !strings.Contains(msg, "from queue "+queue) {
				t.Errorf("the user named the queue, Kueue did not choose it: %s", msg)
			}

			setSpec(t, c, tj, func(s *trainingv1alpha1.TrainingJobSpec) { s.QueueName = "" })
			testenv.Eventually(t, "label removed and job unsuspended", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(job), job)
				_, labelled := job.Labels[trainingv1alpha1.LabelKueueQueueName]
				return !labelled && !ptr.Deref(job.Spec.RunPolicy.Suspend, true), err
			})
			waitTJ(t, c, tj, "no longer Queued", func(tj *trainingv1alpha1.TrainingJob) bool {
				return conditions.Get(tj, trainingv1alpha1.ConditionQueued) == nil && tj.Status.Queue == nil && tj.Status.Phase == trainingv1alpha1.PhasePending
			})
		})
	}
}

// TestUnmarkedDefaultQueueStaysKueues: a child in queue default that does
// not carry the operator's mark (Kueue's default-LocalQueue webhook
// labelled it, or an operator older than the mark created it) stays in
// Kueue's default LocalQueue once its TrainingJob names no queue: the
// operator neither takes the label off nor unsuspends the child, and says
// the queue is Kueue's default.
func TestUnmarkedDefaultQueueStaysKueues(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := newTrainingJob(ns, "defaulted", 1)
	tj.Spec.QueueName = "default"
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "defaulted-r1")
	waitTJ(t, c, tj, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queuedStatus(tj, ReasonWaiting) })
	unmark := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, backend.AnnotationQueueFromSpec))
	if err := c.Patch(t.Context(), job, unmark); err != nil {
		t.Fatal(err)
	}
	if _, marked := job.Annotations[backend.AnnotationQueueFromSpec]; marked || job.Labels[trainingv1alpha1.LabelKueueQueueName] != "default" {
		t.Fatalf("the child must be in queue default without the mark: labels %v annotations %v", job.Labels, job.Annotations)
	}
	settle(t, c, op, ns, job)
	op.writes.Reset()

	setSpec(t, c, tj, func(s *trainingv1alpha1.TrainingJobSpec) { s.QueueName = "" })
	waitTJ(t, c, tj, "Queued in Kueue's default LocalQueue", func(tj *trainingv1alpha1.TrainingJob) bool {
		return queuedStatus(tj, ReasonWaiting) && tj.Status.Queue != nil && tj.Status.Queue.LocalQueue == "default" &&
			strings.Contains(conditions.Get(tj, trainingv1alpha1.ConditionQueued).Message, "LocalQueue default, Kueue's default for the namespace")
	})
	settle(t, c, op, ns, tj, job)
	if w := op.writes.Namespace(ns); w.Count("patch", "pytorchjobs")+w.Count("update", "pytorchjobs") != 0 {
		t.Errorf("the operator wrote the child Kueue keeps in its default LocalQueue: %s", w)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(job.Spec.RunPolicy.Suspend, false) || job.Labels[trainingv1alpha1.LabelKueueQueueName] != "default" {
		t.Errorf("the child must stay suspended in queue default: suspend %v labels %v", job.Spec.RunPolicy.Suspend, job.Labels)
	}
}
