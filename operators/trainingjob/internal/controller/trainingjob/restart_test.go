package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// checkpointed is a TrainingJob with an operator-created checkpoint claim
// that restarts without backoff unless told otherwise.
func checkpointed(ns, name string, workers, maxRestarts, backoff int32) *trainingv1alpha1.TrainingJob {
	tj := newTrainingJob(ns, name, workers)
	tj.Spec.Resources = &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 1}}
	tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{
		Size:                  ptr.To(resource.MustParse("1Gi")),
		MaxRestarts:           ptr.To(maxRestarts),
		RestartBackoffSeconds: ptr.To(backoff),
	}
	return tj
}

// startPods acts out Kubeflow creating one pod per role of a run from the
// job's templates, and the job running since a minute ago.
func startPods(t *testing.T, c client.Client, job *kubeflowv1.PyTorchJob) map[kubeflowv1.ReplicaType]*corev1.Pod {
	t.Helper()
	pods := map[kubeflowv1.ReplicaType]*corev1.Pod{}
	for role, rs := range job.Spec.PyTorchReplicaSpecs {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: job.Namespace, Name: job.Name + "-" + strings.ToLower(string(role)) + "-0",
				Labels:          rs.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, kubeflowv1.GroupVersion.WithKind("PyTorchJob"))},
			},
			Spec: rs.Template.Spec,
		}
		if err := c.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodRunning
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: "pytorch", Image: "x", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		})
		pods[role] = pod
	}
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		s.StartTime = ptr.To(metav1.NewTime(time.Now().Add(-time.Minute)))
		jobCond(s, kubeflowv1.JobCreated, corev1.ConditionTrue, "PyTorchJobCreated", "created")
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "running")
	})
	return pods
}

func setPodStatus(t *testing.T, c client.Client, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	t.Helper()
	testenv.Eventually(t, "update pod "+pod.Name+" status", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		mutate(&pod.Status)
		err := c.Status().Update(ctx, pod)
		return err == nil, ignoreConflict(err)
	})
}

// disrupt acts out the control plane terminating a pod for its own
// reasons: the DisruptionTarget condition, then SIGTERM (exit 143).
func disrupt(t *testing.T, c client.Client, pod *corev1.Pod, reason string) {
	t.Helper()
	setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: "acted out", LastTransitionTime: metav1.Now()})
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error", FinishedAt: metav1.Now()}}
	})
}

// failJob acts out Kubeflow giving up on a run: a replica failed.
func failJob(t *testing.T, c client.Client, job *kubeflowv1.PyTorchJob) {
	t.Helper()
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionFalse, "PyTorchJobFailed", "")
		jobCond(s, kubeflowv1.JobFailed, corev1.ConditionTrue, "PyTorchJobFailed", fmt.Sprintf("PyTorchJob %s is failed because 1 Worker replica(s) failed.", job.Name))
	})
}

// disruptRun acts out a run whose Master the control plane terminates for
// the given DisruptionTarget reason, after which Kubeflow fails the run.
func disruptRun(t *testing.T, c client.Client, job *kubeflowv1.PyTorchJob, reason string) {
	t.Helper()
	pods := startPods(t, c, job)
	disrupt(t, c, pods[kubeflowv1.PyTorchJobReplicaTypeMaster], reason)
	failJob(t, c, job)
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

func mountsCheckpoint(spec corev1.PodSpec, claim string) bool {
	for _, v := range spec.Volumes {
		if v.Name == trainingv1alpha1.CheckpointVolume && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

func jobsOf(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob) []string {
	t.Helper()
	list := &kubeflowv1.PyTorchJobList{}
	if err := c.List(t.Context(), list, client.InNamespace(tj.Namespace), client.MatchingLabels{trainingv1alpha1.LabelJobName: tj.Name}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range list.Items {
		names = append(names, j.Name)
	}
	return names
}

func TestPreemptedWorkerStartsTheNextRunOnTheSameClaim(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := checkpointed(ns, "preempt", 2, 3, 0)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{}
	testenv.Eventually(t, "checkpoint claim created", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "preempt-checkpoint"}, claim)
		return err == nil, client.IgnoreNotFound(err)
	})
	if len(claim.OwnerReferences) != 0 || claim.Labels[trainingv1alpha1.LabelJobName] != "preempt" ||
		claim.Spec.AccessModes[0] != corev1.ReadWriteOnce || claim.Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Errorf("claim %+v %+v: want 1Gi ReadWriteOnce, labelled, without owner (Retain)", claim.ObjectMeta, claim.Spec)
	}
	testenv.WaitForEvent(t, c, tj, "CheckpointClaimCreated")

	job1 := waitPyTorchJob(t, c, ns, "preempt-r1")
	master := job1.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Spec
	worker := job1.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Template.Spec
	if !mountsCheckpoint(master, claim.Name) || mountsCheckpoint(worker, claim.Name) {
		t.Errorf("ReadWriteOnce: only the Master (rank 0) mounts the claim; master %v worker %v", master.Volumes, worker.Volumes)
	}
	wantEnv := map[string]string{"MLPLATFORM_CHECKPOINT_DIR": "/checkpoints", "MLPLATFORM_RUN": "1", "MLPLATFORM_RESTART_COUNT": "0", "MLPLATFORM_RESUME": "false"}
	for k, v := range wantEnv {
		if got := envOf(master.Containers[0])[k]; got != v {
			t.Errorf("run 1 master env %s=%q, want %q", k, got, v)
		}
	}

	pods := startPods(t, c, job1)
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	restartsBefore := testutil.ToFloat64(op.reconciler.Metrics.Restarted.WithLabelValues(ns, "Infrastructure", "Preempted"))
	lostBefore := testutil.ToFloat64(op.reconciler.Metrics.AcceleratorSecondsLost.WithLabelValues(ns, "a100"))

	// The scheduler preempts the worker; its peer keeps running (Kubeflow
	// with clean-pod policy None leaves it) and Kubeflow fails the run.
	disrupt(t, c, pods[kubeflowv1.PyTorchJobReplicaTypeWorker], corev1.PodReasonPreemptionByScheduler)
	failJob(t, c, job1)

	got := waitTJ(t, c, tj, "run 2 decided", func(tj *trainingv1alpha1.TrainingJob) bool { return tj.Status.Run == 2 })
	if got.Status.RestartCount != 1 || len(got.Status.Runs) != 1 {
		t.Fatalf("restartCount %d runs %+v, want one restart recorded", got.Status.RestartCount, got.Status.Runs)
	}
	r := got.Status.Runs[0]
	if r.Run != 1 || r.Reason != "Preempted" || r.Class != trainingv1alpha1.FailureClassInfrastructure || r.StartTime == nil || r.EndTime == nil {
		t.Errorf("run record %+v", r)
	}
	if conditions.IsTrue(got, commonv1alpha1.ConditionFailed) {
		t.Error("a preempted run must not fail the TrainingJob")
	}
	ev := testenv.WaitForEvent(t, c, tj, "Restarting")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "preempted") || !strings.Contains(ev.Message, "restart 1 of 3") {
		t.Errorf("Restarting event %s %q", ev.Type, ev.Message)
	}
	// The master of run 1 still ran: it is stopped before run 2 starts.
	testenv.WaitGone(t, c, pods[kubeflowv1.PyTorchJobReplicaTypeMaster])

	job2 := waitPyTorchJob(t, c, ns, "preempt-r2")
	master2 := job2.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Spec
	if !mountsCheckpoint(master2, claim.Name) {
		t.Errorf("run 2 does not mount the same claim %s: %v", claim.Name, master2.Volumes)
	}
	wantEnv = map[string]string{"MLPLATFORM_CHECKPOINT_DIR": "/checkpoints", "MLPLATFORM_RUN": "2", "MLPLATFORM_RESTART_COUNT": "1", "MLPLATFORM_RESUME": "true"}
	if diff := cmp.Diff(wantEnv, envOf(master2.Containers[0]), cmp.FilterPath(func(p cmp.Path) bool {
		k := p.Last().String()
		return !strings.Contains(k, "MLPLATFORM")
	}, cmp.Ignore())); diff != "" {
		t.Errorf("run 2 env contract (-want +got):\n%s", diff)
	}
	got = waitTJ(t, c, tj, "run 2 created", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionRestarting)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonRunStarted &&
			conditions.IsTrue(tj, trainingv1alpha1.ConditionCreated) && tj.Status.Job.Name == "preempt-r2"
	})
	if got.Status.NextRunTime != nil || got.Status.CheckpointClaim != claim.Name {
		t.Errorf("nextRunTime %v checkpointClaim %q", got.Status.NextRunTime, got.Status.CheckpointClaim)
	}
	// The failed run's job stays for its history; nothing else appeared.
	if diff := cmp.Diff([]string{"preempt-r1", "preempt-r2"}, jobsOf(t, c, tj)); diff != "" {
		t.Errorf("Kubeflow jobs (-want +got):\n%s", diff)
	}
	if d := testutil.ToFloat64(op.reconciler.Metrics.Restarted.WithLabelValues(ns, "Infrastructure", "Preempted")) - restartsBefore; d != 1 {
		t.Errorf("restarted_total{Infrastructure,Preempted} grew by %v, want 1", d)
	}
	// Two pods with one accelerator each ran for about a minute.
	if d := testutil.ToFloat64(op.reconciler.Metrics.AcceleratorSecondsLost.WithLabelValues(ns, "a100")) - lostBefore; d < 100 {
		t.Errorf("accelerator_seconds_lost_total grew by %v, want about 120", d)
	}

	// Run 2 succeeds: the job succeeds with both runs in its history.
	setJobStatus(t, c, job2, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobSucceeded, corev1.ConditionTrue, "PyTorchJobSucceeded", "done")
	})
	got = waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSucceeded)
	})
	if len(got.Status.Runs) != 2 || got.Status.Runs[1].Reason != ReasonSucceeded || got.Status.RestartCount != 1 {
		t.Errorf("final runs %+v restarts %d", got.Status.Runs, got.Status.RestartCount)
	}
}

func TestUserErrorFailsWithoutANewRun(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := checkpointed(ns, "usererr", 1, 3, 0)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "usererr-r1")
	pods := startPods(t, c, job)
	setPodStatus(t, c, pods[kubeflowv1.PyTorchJobReplicaTypeMaster], func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "ValueError: shapes do not match"}}
	})
	failJob(t, c, job)
	got := waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	if f := got.Status.Failure; f.Class != trainingv1alpha1.FailureClassUser || f.Cause != "Error" || f.ExitCode != 1 {
		t.Errorf("failure %+v, want a user error with exit code 1", f)
	}
	if msg := conditions.Get(got, commonv1alpha1.ConditionFailed).Message; !strings.Contains(msg, "not restarted") || !strings.Contains(msg, "shapes do not match") {
		t.Errorf("Failed message %q", msg)
	}
	if got.Status.Run != 1 || got.Status.RestartCount != 0 {
		t.Errorf("run %d restarts %d, want no new run", got.Status.Run, got.Status.RestartCount)
	}
	// Give a wrong restart every chance to happen before checking.
	testenv.WaitForEvent(t, c, tj, "Failed")
	consistentlyJobs(t, c, tj, []string{"usererr-r1"})
}

func TestMaxRestartsExhaustedFailsWithTheHistory(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := checkpointed(ns, "exhaust", 1, 1, 0)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	disruptRun(t, c, waitPyTorchJob(t, c, ns, "exhaust-r1"), "EvictionByEvictionAPI")
	disruptRun(t, c, waitPyTorchJob(t, c, ns, "exhaust-r2"), "DeletionByPodGC")

	got := waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	var reasons []string
	for _, r := range got.Status.Runs {
		reasons = append(reasons, fmt.Sprintf("%d:%s:%s", r.Run, r.Reason, r.Class))
	}
	if diff := cmp.Diff([]string{"1:Drained:Infrastructure", "2:NodeLost:Infrastructure"}, reasons); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if msg := conditions.Get(got, commonv1alpha1.ConditionFailed).Message; !strings.Contains(msg, "1 of 1 restarts used (maxRestarts)") {
		t.Errorf("Failed message %q does not say the restarts are exhausted", msg)
	}
	if got.Status.RestartCount != 1 || got.Status.Failure.Cause != "NodeLost" {
		t.Errorf("restarts %d failure %+v", got.Status.RestartCount, got.Status.Failure)
	}
	testenv.WaitForEvent(t, c, tj, "Failed")
	consistentlyJobs(t, c, tj, []string{"exhaust-r1", "exhaust-r2"})
}

// TestOperatorKilledBetweenDecidingAndCreatingTheNextRun stops the
// operator after it recorded the restart but before the next run's job
// exists (the backoff holds it), then starts two operators at once from
// cold caches, an hour later: exactly one next run appears.
func TestOperatorKilledBetweenDecidingAndCreatingTheNextRun(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := checkpointed(ns, "killed", 1, 3, 3600)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	disruptRun(t, c, waitPyTorchJob(t, c, ns, "killed-r1"), "DeletionByTaintManager")
	decided := waitTJ(t, c, tj, "restart decided", func(tj *trainingv1alpha1.TrainingJob) bool {
		return tj.Status.Run == 2 && conditions.IsTrue(tj, trainingv1alpha1.ConditionRestarting)
	})
	if decided.Status.NextRunTime == nil || time.Until(decided.Status.NextRunTime.Time) < 59*time.Minute {
		t.Fatalf("nextRunTime %v, want an hour ahead", decided.Status.NextRunTime)
	}
	if decided.Status.Phase != trainingv1alpha1.PhaseRestarting {
		t.Errorf("phase %s, want Restarting", decided.Status.Phase)
	}
	op.stop(t)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "killed-r2"}, &kubeflowv1.PyTorchJob{}); !apierrors.IsNotFound(err) {
		t.Fatalf("run 2 must wait for its backoff, got %v", err)
	}

	later := func(r *Reconciler) {
		clk := &testClock{}
		clk.advance(2 * time.Hour)
		r.Clock = clk
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			startOperator(t, later)
		}()
	}
	wg.Wait()
	waitPyTorchJob(t, c, ns, "killed-r2")
	waitTJ(t, c, tj, "run 2 started", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionCreated) && tj.Status.Job != nil && tj.Status.Job.Name == "killed-r2"
	})
	testenv.Consistently(t, "exactly one restart", 3*time.Second, func(ctx context.Context) error {
		got, err := getTJ(ctx, c, tj)
		if err != nil {
			return err
		}
		if got.Status.Run != 2 || got.Status.RestartCount != 1 || len(got.Status.Runs) != 1 {
			return fmt.Errorf("run %d restarts %d history %+v", got.Status.Run, got.Status.RestartCount, got.Status.Runs)
		}
		return nil
	})
	consistentlyJobs(t, c, tj, []string{"killed-r1", "killed-r2"})
}

// TestAStaleCacheNeverDecidesTwice runs the phases on a copy of the
// TrainingJob from before the restart was recorded, as a lagging cache
// would hand it over: the live read refuses the second decision and
// nothing is written.
func TestAStaleCacheNeverDecidesTwice(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := checkpointed(ns, "stale", 1, 3, 3600)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job1 := waitPyTorchJob(t, c, ns, "stale-r1")
	pods := startPods(t, c, job1)
	stale := waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	disrupt(t, c, pods[kubeflowv1.PyTorchJobReplicaTypeMaster], corev1.PodReasonPreemptionByScheduler)
	failJob(t, c, job1)
	waitTJ(t, c, tj, "restart decided", func(tj *trainingv1alpha1.TrainingJob) bool { return tj.Status.Run == 2 })
	// The events of the decision are emitted asynchronously; let them out.
	testenv.WaitForEvent(t, c, tj, "Restarting")
	settle(t, c, op, ns, tj)

	op.nsWrites.reset()
	s := newScope(stale, time.Now())
	for _, p := range []func(context.Context, *scope) (ctrl.Result, error){op.reconciler.resolveBackend, op.reconciler.observeJob, op.reconciler.checkpointClaim, op.reconciler.createJob, op.reconciler.observePods, op.reconciler.decideRunEnd} {
		if _, err := p(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	if !s.stale || s.end != nil {
		t.Errorf("stale %v end %+v: a run already decided must not be decided again", s.stale, s.end)
	}
	if w := op.nsWrites.in(ns); len(w) != 0 {
		t.Errorf("the stale reconcile wrote %d times: %v", len(w), w)
	}
	_, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := getTJ(t.Context(), c, tj)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.RestartCount != 1 {
		t.Errorf("restartCount %d, want 1", got.Status.RestartCount)
	}
}

// TestSettledPart2JobsCostNoWrites: a job waiting in its queue, a
// checkpointed job running, and one backing off before its next run write
// nothing on repeated reconciles, nor after an operator restart.
func TestSettledPart2JobsCostNoWrites(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	queued := newTrainingJob(ns, "idle-queued", 1)
	queued.Spec.QueueName = "team-a"
	running := checkpointed(ns, "idle-running", 2, 3, 0)
	backoff := checkpointed(ns, "idle-backoff", 1, 3, 3600)
	all := []*trainingv1alpha1.TrainingJob{queued, running, backoff}
	for _, tj := range all {
		if err := c.Create(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
	}
	waitTJ(t, c, queued, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queuedStatus(tj, ReasonWaiting) })
	startPods(t, c, waitPyTorchJob(t, c, ns, "idle-running-r1"))
	waitTJ(t, c, running, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	disruptRun(t, c, waitPyTorchJob(t, c, ns, "idle-backoff-r1"), corev1.PodReasonPreemptionByScheduler)
	waitTJ(t, c, backoff, "backing off", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRestarting)
	})
	for _, tj := range all {
		waitTJ(t, c, tj, "Created", func(tj *trainingv1alpha1.TrainingJob) bool {
			return conditions.IsTrue(tj, trainingv1alpha1.ConditionCreated) || conditions.IsTrue(tj, trainingv1alpha1.ConditionRestarting)
		})
	}
	testenv.WaitForEvent(t, c, backoff, "Restarting")
	// Let the reconciles triggered by our own writes run out.
	for _, tj := range all {
		settle(t, c, op, ns, tj)
	}

	reconcileAll := func(op *operator, times int) {
		for range times {
			for _, tj := range all {
				if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	op.nsWrites.reset()
	reconcileAll(op, 20)
	if w := op.nsWrites.in(ns); len(w) != 0 {
		t.Fatalf("60 reconciles of settled TrainingJobs wrote %d times: %v", len(w), w)
	}
	op.stop(t)
	op2 := startOperator(t, nil)
	reconcileAll(op2, 5)
	consistentlyNoWrites(t, op2, ns, "a restarted operator leaves settled TrainingJobs alone")
}
