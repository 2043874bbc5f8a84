package trainingjob

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/failure"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// native is a TrainingJob on the native backend.
func native(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
	tj.Spec.Backend = trainingv1alpha1.BackendNative
	return tj
}

func waitBatchJob(t *testing.T, c client.Client, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	testenv.Eventually(t, "Job "+name+" exists", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
		return err == nil, client.IgnoreNotFound(err)
	})
	return job
}

// noBatchJob fails the test when the Job name exists; what says what its
// existence would mean.
func noBatchJob(t *testing.T, c client.Client, ns, name, what string) {
	t.Helper()
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s: %v", what, err)
	}
}

// setBatchStatus acts out the Job controller writing the Job's status.
func setBatchStatus(t *testing.T, c client.Client, job *batchv1.Job, mutate func(*batchv1.JobStatus)) {
	t.Helper()
	testenv.Eventually(t, "update Job "+job.Name+" status", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		mutate(&job.Status)
		err := c.Status().Update(ctx, job)
		return err == nil, ignoreConflict(err)
	})
}

func batchCond(s *batchv1.JobStatus, typ batchv1.JobConditionType, reason, message string, at metav1.Time) {
	s.Conditions = append(s.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: at, LastProbeTime: at})
}

// runRanks acts out the Job controller and the kubelet starting every rank
// of a Job: one running pod per completion index, then the Job's counts.
func runRanks(t *testing.T, c client.Client, job *batchv1.Job) []*corev1.Pod {
	t.Helper()
	n := int(*job.Spec.Completions)
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: job.Namespace, Name: fmt.Sprintf("%s-%d-abcde", job.Name, i),
				Labels:          job.Spec.Template.Labels,
				Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: fmt.Sprint(i)},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
			},
			Spec: job.Spec.Template.Spec,
		}
		pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, i)
		if err := c.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodRunning
			s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: "x", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		})
		pods = append(pods, pod)
	}
	setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
		s.StartTime = ptr.To(metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second)))
		s.Active = int32(n)
		s.Ready = ptr.To(int32(n))
	})
	return pods
}

// createRun creates tj and returns the Job of its first run.
func createRun(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob) *batchv1.Job {
	t.Helper()
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	return waitBatchJob(t, c, tj.Namespace, backend.JobName(tj.Name, 1))
}

// waitService waits for the namespace's headless Service whose subdomain
// job's ranks are.
func waitService(t *testing.T, c client.Client, job *batchv1.Job) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	testenv.Eventually(t, "the ranks' headless Service", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Spec.Template.Spec.Subdomain}, svc)
		return err == nil, client.IgnoreNotFound(err)
	})
	return svc
}

// completeJob acts out the Job controller recording success at a time in
// the past, as after a delay before the operator noticed.
func completeJob(t *testing.T, c client.Client, job *batchv1.Job, pods []*corev1.Pod, at metav1.Time) {
	t.Helper()
	for _, pod := range pods {
		setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodSucceeded
			s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			s.ContainerStatuses[0].Ready = false
			s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: at}}
		})
	}
	n := *job.Spec.Completions
	setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
		s.Active, s.Ready, s.Succeeded = 0, ptr.To[int32](0), n
		s.CompletedIndexes = fmt.Sprintf("0-%d", n-1)
		if n == 1 {
			s.CompletedIndexes = "0"
		}
		s.CompletionTime = &at
		batchCond(s, batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods", at)
		batchCond(s, batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods", at)
	})
}

// failJobAfter acts out a pod failing and the Job controller failing the
// Job for it (backoffLimit 0).
func failBatchJob(t *testing.T, c client.Client, job *batchv1.Job) {
	t.Helper()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
		s.Active, s.Ready, s.Failed = 0, ptr.To[int32](0), 1
		s.FailedIndexes = nil
		batchCond(s, batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit", now)
		batchCond(s, batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit", now)
	})
}

func TestNativeLifecycleToSucceededWithinTheWriteBudget(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	clk := &testClock{}
	op := startOperator(t, func(r *Reconciler) { r.Clock = clk })

	tj := native(newTrainingJob(ns, "mnist", 2))
	tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](600)
	job := createRun(t, c, tj)
	if !metav1.IsControlledBy(job, tj) || *job.Spec.CompletionMode != batchv1.IndexedCompletion || *job.Spec.Completions != 2 || *job.Spec.BackoffLimit != 0 {
		t.Errorf("Job: owners %v mode %v completions %d backoffLimit %d", job.OwnerReferences, *job.Spec.CompletionMode, *job.Spec.Completions, *job.Spec.BackoffLimit)
	}
	svc := waitService(t, c, job)
	// The namespace's, which outlives every run: nobody owns it.
	if svc.Name != rankdns.Service || svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector != nil || len(svc.OwnerReferences) != 0 || !rankdns.Published(svc, operatorName) {
		t.Errorf("Service %s clusterIP %q selector %v owners %v labels %v, want the namespace's headless one, owned by nobody", svc.Name, svc.Spec.ClusterIP, svc.Spec.Selector, svc.OwnerReferences, svc.Labels)
	}
	got := waitTJ(t, c, tj, "Created", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			trainingv1alpha1.ConditionCreated:   metav1.ConditionTrue,
			trainingv1alpha1.ConditionFinished:  metav1.ConditionFalse,
			commonv1alpha1.ConditionReconciling: metav1.ConditionTrue,
		})
	})
	if got.Status.Backend != trainingv1alpha1.BackendNative || got.Status.Job == nil || got.Status.Job.Kind != "Job" || got.Status.Job.APIVersion != "batch/v1" {
		t.Errorf("status after create: backend %q job %+v", got.Status.Backend, got.Status.Job)
	}

	pods := runRanks(t, c, job)
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{trainingv1alpha1.ConditionRunning: metav1.ConditionTrue, commonv1alpha1.ConditionReconciling: ""})
	})
	// The Job controller recorded the end 40 s before the operator could
	// have seen it: status and the TTL take the Job's time.
	end := metav1.NewTime(time.Now().Add(-40 * time.Second).Truncate(time.Second))
	completeJob(t, c, job, pods, end)
	got = waitTJ(t, c, tj, "Succeeded and Finished", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			commonv1alpha1.ConditionSucceeded:  metav1.ConditionTrue,
			trainingv1alpha1.ConditionFinished: metav1.ConditionTrue,
			commonv1alpha1.ConditionStalled:    "",
		})
	})
	if got.Status.CompletionTime == nil || !got.Status.CompletionTime.Equal(&end) {
		t.Errorf("completionTime %v, want the Job's %v", got.Status.CompletionTime, end)
	}
	if want := []trainingv1alpha1.RoleStatus{{Name: nativejob.RolePods, Succeeded: 2}}; len(got.Status.Roles) != 1 || got.Status.Roles[0] != want[0] {
		t.Errorf("roles %+v, want %+v", got.Status.Roles, want)
	}
	testenv.WaitForEvent(t, c, tj, "Succeeded")
	// The NetworkPolicy and Job creates, three status patches, one event,
	// and the namespace's Service, made for the first run of several pods.
	if w := op.nsWrites.in(ns); len(w) > 7 {
		t.Errorf("a quiet native lifecycle cost %d writes, want at most 7: %v", len(w), w)
	}

	op.nsWrites.reset()
	for range 20 {
		if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
			t.Fatal(err)
		}
	}
	if w := op.nsWrites.in(ns); len(w) != 0 {
		t.Fatalf("20 reconciles of a settled native TrainingJob wrote %d times: %v", len(w), w)
	}

	// The TTL counts from the Job's completion time: 600 s after it, not
	// after the operator noticed.
	clk.advance(600*time.Second - time.Since(end.Time) + time.Second)
	poke(t, c, tj)
	testenv.WaitGone(t, c, tj)
}

func TestNativeUserErrorFailsWithoutANewRun(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := native(checkpointed(ns, "crash", 1, 3, 0))
	job := createRun(t, c, tj)
	pods := runRanks(t, c, job)
	setPodStatus(t, c, pods[0], func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "ValueError: bad learning rate", FinishedAt: metav1.Now()}}
	})
	failBatchJob(t, c, job)
	got := waitTJ(t, c, tj, "Failed, Stalled and Finished", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			commonv1alpha1.ConditionFailed:     metav1.ConditionTrue,
			commonv1alpha1.ConditionStalled:    metav1.ConditionTrue,
			trainingv1alpha1.ConditionFinished: metav1.ConditionTrue,
		})
	})
	if f := got.Status.Failure; f == nil || f.Class != trainingv1alpha1.FailureClassUser || f.ExitCode != 1 || f.TerminationMessage != "ValueError: bad learning rate" {
		t.Errorf("failure %+v", got.Status.Failure)
	}
	if got.Status.Run != 1 || got.Status.RestartCount != 0 {
		t.Errorf("run %d restarts %d, want 1 0", got.Status.Run, got.Status.RestartCount)
	}
	noBatchJob(t, c, ns, "crash-r2", "a user error started run 2")
	ev := testenv.WaitForEvent(t, c, tj, "Failed")
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("Failed event type %s", ev.Type)
	}
}

// TestNativeDeadlineEndsTheJobWithoutANewRun: at runPolicy.activeDeadlineSeconds
// the Job controller deletes the running ranks itself. Deleted running
// pods are what an infrastructure failure looks like, but the job used
// the time it was given, and a checkpointed job must not start another
// run for it.
func TestNativeDeadlineEndsTheJobWithoutANewRun(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := native(checkpointed(ns, "deadline", 2, 3, 0))
	tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](60)
	job := createRun(t, c, tj)
	pods := runRanks(t, c, job)
	for _, pod := range pods {
		// A finalizer keeps each deleted pod, as a kubelet that is still
		// stopping it does.
		patchFinalizer(t, c, pod, "mlplatform.dev/test-keep")
		if err := c.Delete(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
		batchCond(s, batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now)
	})
	got := waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	if f := got.Status.Failure; f == nil || f.Class != trainingv1alpha1.FailureClassUser || f.Cause != "DeadlineExceeded" {
		t.Errorf("failure %+v, want the deadline", got.Status.Failure)
	}
	if got.Status.Run != 1 || got.Status.RestartCount != 0 {
		t.Errorf("run %d restarts %d, want 1 0", got.Status.Run, got.Status.RestartCount)
	}
	if msg := conditions.Get(got, commonv1alpha1.ConditionFailed).Message; !strings.Contains(msg, "active longer than specified deadline (runPolicy.activeDeadlineSeconds)") || !strings.Contains(msg, "not restarted") {
		t.Errorf("Failed message %q does not name the deadline", msg)
	}
	for _, pod := range pods {
		patchFinalizer(t, c, pod, "")
	}
	noBatchJob(t, c, ns, "deadline-r2", "the deadline started run 2")
}

// TestNativeRestartsKeepToTheJobsDeadline: runPolicy.activeDeadlineSeconds
// bounds the whole job. A run after a restart gets what is left of it
// (runRanks starts each run a minute ago), and a job whose deadline ends
// before its next run would start is not restarted.
func TestNativeRestartsKeepToTheJobsDeadline(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	left := native(checkpointed(ns, "left", 1, 3, 0))
	left.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](600)
	over := native(checkpointed(ns, "over", 1, 3, 0))
	over.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](30)
	for _, tj := range []*trainingv1alpha1.TrainingJob{left, over} {
		job := createRun(t, c, tj)
		if got := ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0); got != *tj.Spec.RunPolicy.ActiveDeadlineSeconds {
			t.Errorf("%s: run 1 deadline %ds, want all of it", tj.Name, got)
		}
		pods := runRanks(t, c, job)
		disrupt(t, c, pods[0], corev1.PodReasonPreemptionByScheduler)
		failBatchJob(t, c, job)
	}

	run2 := waitBatchJob(t, c, ns, "left-r2")
	// 600 s less the minute run 1 ran, less the test's own time.
	if got := ptr.Deref(run2.Spec.ActiveDeadlineSeconds, 0); got > 540 || got < 400 {
		t.Errorf("run 2 deadline %ds, want what is left of 600 s after run 1's minute", got)
	}

	got := waitTJ(t, c, over, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	if msg := conditions.Get(got, commonv1alpha1.ConditionFailed).Message; !strings.Contains(msg, "runPolicy.activeDeadlineSeconds (30s") || !strings.Contains(msg, "ends before run 2 could start") {
		t.Errorf("Failed message %q does not say the deadline ended the job", msg)
	}
	if got.Status.RestartCount != 0 {
		t.Errorf("restarts %d, want none", got.Status.RestartCount)
	}
	noBatchJob(t, c, ns, "over-r2", "a job past its deadline started run 2")
}

// TestNativeNextRunSaysWhichPodsItWaitsFor: a run starts only once every
// pod of the one before it ended, so that two runs never write the same
// checkpoint. A pod that stays terminating (its node is gone) holds the
// next run back for as long, and the job's status names it instead of
// announcing a start time that has passed.
func TestNativeNextRunSaysWhichPodsItWaitsFor(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := native(checkpointed(ns, "stuck", 2, 3, 0))
	job := createRun(t, c, tj)
	pods := runRanks(t, c, job)
	patchFinalizer(t, c, pods[1], "mlplatform.dev/test-keep")
	if err := c.Delete(t.Context(), pods[1]); err != nil {
		t.Fatal(err)
	}
	disrupt(t, c, pods[0], corev1.PodReasonPreemptionByScheduler)
	failBatchJob(t, c, job)
	waitTJ(t, c, tj, "run 2 waiting for run 1's pod", func(tj *trainingv1alpha1.TrainingJob) bool {
		r := conditions.Get(tj, commonv1alpha1.ConditionReconciling)
		return tj.Status.Run == 2 && r != nil && r.Message == "Run 2 waits for the pods of run 1 to end: "+pods[1].Name
	})
	noBatchJob(t, c, ns, "stuck-r2", "run 2 started while a pod of run 1 still ran")
	patchFinalizer(t, c, pods[1], "")
	waitBatchJob(t, c, ns, "stuck-r2")
}

// patchFinalizer sets obj's one finalizer, or removes every finalizer when
// name is empty.
func patchFinalizer(t *testing.T, c client.Client, obj client.Object, name string) {
	t.Helper()
	body := []byte(`{"metadata":{"finalizers":null}}`)
	if name != "" {
		body = fmt.Appendf(nil, `{"metadata":{"finalizers":[%q]}}`, name)
	}
	if err := c.Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

func TestNativeDisruptionResumesFromTheCheckpointUntilMaxRestarts(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := native(checkpointed(ns, "resume", 1, 1, 0))
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		job := waitBatchJob(t, c, ns, fmt.Sprintf("resume-r%d", run))
		spec := job.Spec.Template.Spec
		if !mountsCheckpoint(spec, "resume-checkpoint") {
			t.Errorf("run %d does not mount the checkpoint claim", run)
		}
		env := envOf(spec.Containers[0])
		if env[trainingv1alpha1.EnvRun] != fmt.Sprint(run) || env[trainingv1alpha1.EnvRestartCount] != fmt.Sprint(run-1) || env[trainingv1alpha1.EnvResume] != fmt.Sprint(run > 1) {
			t.Errorf("run %d checkpoint contract %v", run, env)
		}
		pods := runRanks(t, c, job)
		disrupt(t, c, pods[0], corev1.PodReasonPreemptionByScheduler)
		failBatchJob(t, c, job)
	}
	got := waitTJ(t, c, tj, "Failed after its one restart", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	if got.Status.RestartCount != 1 || len(got.Status.Runs) != 2 || got.Status.Runs[0].Class != trainingv1alpha1.FailureClassInfrastructure {
		t.Errorf("restarts %d runs %+v", got.Status.RestartCount, got.Status.Runs)
	}
	if msg := conditions.Get(got, commonv1alpha1.ConditionFailed).Message; !strings.Contains(msg, "not restarted") {
		t.Errorf("Failed message %q does not say why it was not restarted", msg)
	}
}

func TestNativeSuspendAndResume(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := native(newTrainingJob(ns, "pause", 2))
	job := createRun(t, c, tj)
	runRanks(t, c, job)
	setSuspend(t, c, tj, true)
	testenv.Eventually(t, "the Job is suspended", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), job)
		return err == nil && ptr.Deref(job.Spec.Suspend, false), err
	})
	setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
		s.Active, s.Ready = 0, ptr.To[int32](0)
		batchCond(s, batchv1.JobSuspended, "JobSuspended", "Job suspended", metav1.Now())
	})
	waitTJ(t, c, tj, "Suspended", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{commonv1alpha1.ConditionSuspended: metav1.ConditionTrue, commonv1alpha1.ConditionReconciling: ""}) &&
			tj.Status.Phase == trainingv1alpha1.PhaseSuspended
	})
	setSuspend(t, c, tj, false)
	testenv.Eventually(t, "the Job resumes", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), job)
		return err == nil && !ptr.Deref(job.Spec.Suspend, true), err
	})
	waitTJ(t, c, tj, "resuming", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionSuspended) == metav1.ConditionFalse
	})
	if jobs := nativeJobsOf(t, c, tj); len(jobs) != 1 {
		t.Errorf("jobs %v, want the one run's Job suspended in place", jobs)
	}
}

func setSuspend(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob, suspend bool) {
	t.Helper()
	p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend))
	if err := c.Patch(t.Context(), tj.DeepCopy(), p); err != nil {
		t.Fatal(err)
	}
}

func nativeJobsOf(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob) []string {
	t.Helper()
	list := &batchv1.JobList{}
	if err := c.List(t.Context(), list, client.InNamespace(tj.Namespace), client.MatchingLabels{trainingv1alpha1.LabelJobName: tj.Name}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range list.Items {
		names = append(names, j.Name)
	}
	return names
}

// TestNativeKueueAdmitsAndEvicts acts out Kueue's batch/Job integration:
// it admits the Job by unsuspending it and injecting its flavor's node
// selector and tolerations, and evicts it by suspending it again. The
// operator keeps what Kueue owns. It stays for speed; the real Kueue v0.17
// does the same (one write admits, node selector, tolerations and
// unsuspend together), as internal/kueuecompat shows with the real binary.
func TestNativeKueueAdmitsAndEvicts(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := native(newTrainingJob(ns, "queued", 2))
	tj.Spec.QueueName = "team-a"
	job := createRun(t, c, tj)
	if !ptr.Deref(job.Spec.Suspend, false) || job.Labels[trainingv1alpha1.LabelKueueQueueName] != "team-a" {
		t.Fatalf("queued Job suspend %v labels %v, want created suspended with the queue label", job.Spec.Suspend, job.Labels)
	}
	waitTJ(t, c, tj, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queuedStatus(tj, ReasonWaiting) })

	kueueAdmit := func() {
		testenv.Eventually(t, "Kueue admits the Job", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
				return false, err
			}
			job.Spec.Suspend = ptr.To(false)
			job.Spec.Template.Spec.NodeSelector = map[string]string{"cloud.example.com/flavor": "a100-spot"}
			job.Spec.Template.Spec.Tolerations = append(job.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists})
			err := c.Update(ctx, job)
			return err == nil, ignoreConflict(err)
		})
	}
	kueueAdmit()
	waitTJ(t, c, tj, "Admitted", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonAdmitted
	})
	runRanks(t, c, job)
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	// Reconciles of the admitted job leave Kueue's changes alone.
	for range 5 {
		if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(job.Spec.Suspend, true) || job.Spec.Template.Spec.NodeSelector["cloud.example.com/flavor"] != "a100-spot" || len(job.Spec.Template.Spec.Tolerations) == 0 {
		t.Errorf("Kueue's admission was undone: suspend %v nodeSelector %v tolerations %v", job.Spec.Suspend, job.Spec.Template.Spec.NodeSelector, job.Spec.Template.Spec.Tolerations)
	}

	// Kueue evicts: it suspends the Job; the operator never unsuspends it.
	testenv.Eventually(t, "Kueue evicts the Job", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		job.Spec.Suspend = ptr.To(true)
		err := c.Update(ctx, job)
		return err == nil, ignoreConflict(err)
	})
	got := waitTJ(t, c, tj, "Queued again", func(tj *trainingv1alpha1.TrainingJob) bool { return queuedStatus(tj, ReasonEvicted) })
	if got.Status.RestartCount != 0 || got.Status.Run != 1 {
		t.Errorf("an eviction counted: run %d restarts %d", got.Status.Run, got.Status.RestartCount)
	}
	for range 5 {
		if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(job.Spec.Suspend, false) {
		t.Error("the operator unsuspended a Job that Kueue evicted")
	}
}

func TestNativeOperatorRestartMidRunCreatesNoSecondJob(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := native(newTrainingJob(ns, "steady", 2))
	job := createRun(t, c, tj)
	runRanks(t, c, job)
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	op.stop(t)
	op2 := startOperator(t, nil)
	for range 5 {
		if _, err := op2.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
			t.Fatal(err)
		}
	}
	if jobs := nativeJobsOf(t, c, tj); len(jobs) != 1 || jobs[0] != "steady-r1" {
		t.Errorf("jobs after an operator restart %v, want only steady-r1", jobs)
	}
	if w := op2.nsWrites.in(ns); len(w) != 0 {
		t.Errorf("a restarted operator wrote %d times for a running job: %v", len(w), w)
	}
}

// TestNativeJobTheAPIRejectsStallsWithoutHotRetry: an extended resource
// requested above its limit passes the TrainingJob's CRD (whose rules check
// cpu, memory and ephemeral-storage) but not the Job's validation, which
// wants requests of resources that cannot be overcommitted equal to limits.
func TestNativeJobTheAPIRejectsStallsWithoutHotRetry(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := native(newTrainingJob(ns, "greedy", 1))
	tj.Spec.Resources = &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"example.com/dongle": resource.MustParse("2")},
		Limits:   corev1.ResourceList{"example.com/dongle": resource.MustParse("1")},
	}}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "Stalled with the API's message", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, commonv1alpha1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == commonv1alpha1.ReasonChildRejected
	})
	if msg := conditions.Get(got, commonv1alpha1.ConditionStalled).Message; !strings.Contains(msg, "must be equal to example.com/dongle limit") {
		t.Errorf("Stalled message %q lacks the API's explanation", msg)
	}
	testenv.WaitForEvent(t, c, tj, commonv1alpha1.ReasonChildRejected)
	creates := func() int {
		n := 0
		for _, w := range op.nsWrites.in(ns) {
			if w.Verb == "create" && w.Resource == "jobs" {
				n++
			}
		}
		return n
	}
	for range 10 {
		if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := creates(); n != 1 {
		t.Errorf("the rejected Job was sent %d times, want once until the spec changes", n)
	}
	// A change of the spec tries again.
	p := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"runPolicy":{"ttlSecondsAfterFinished":60}}}`))
	if err := c.Patch(t.Context(), tj.DeepCopy(), p); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a second attempt after the spec changed", func(context.Context) (bool, error) { return creates() == 2, nil })
}

func TestBackendAdmission(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	ps := native(newTrainingJob(ns, "ps", 2))
	ps.Spec.Framework = trainingv1alpha1.FrameworkTensorFlow
	ps.Spec.ParameterServers = ptr.To[int32](1)
	paddle := native(newTrainingJob(ns, "paddle", 2))
	paddle.Spec.Framework = trainingv1alpha1.FrameworkPaddle
	for _, tj := range []*trainingv1alpha1.TrainingJob{ps, paddle} {
		err := c.Create(t.Context(), tj)
		if err == nil || !strings.Contains(err.Error(), "use backend: kubeflow") {
			t.Errorf("%s: %v, want a rejection saying to use backend: kubeflow", tj.Name, err)
		}
	}
	// The same jobs on kubeflow are accepted.
	ps.Spec.Backend = trainingv1alpha1.BackendKubeflow
	if err := c.Create(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	for name, patch := range map[string]string{
		"changed": `{"spec":{"backend":"native"}}`,
		"removed": `{"spec":{"backend":null}}`,
	} {
		err := c.Patch(t.Context(), ps.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil || !strings.Contains(err.Error(), "backend is immutable") {
			t.Errorf("backend %s: %v, want it refused as immutable", name, err)
		}
	}
	jax := newTrainingJob(ns, "jax", 2)
	jax.Spec.Framework = trainingv1alpha1.FrameworkJAX
	jax.Spec.Backend = trainingv1alpha1.BackendKubeflow
	if err := c.Create(t.Context(), jax); err == nil || !strings.Contains(err.Error(), "use backend: native") {
		t.Errorf("jax on kubeflow: %v, want a rejection saying to use backend: native", err)
	}
	if err := c.Create(t.Context(), native(jax)); err != nil {
		t.Errorf("jax on native: %v", err)
	}
	unset := newTrainingJob(ns, "unset", 1)
	if err := c.Create(t.Context(), unset); err != nil {
		t.Fatal(err)
	}
	err := c.Patch(t.Context(), unset.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"backend":"native"}}`)))
	if err == nil || !strings.Contains(err.Error(), "backend is immutable") {
		t.Errorf("setting backend later: %v, want it refused as immutable", err)
	}
}

// TestFirstReconcileCreatesTheRunAndRecordsTheBackendOnce runs one
// reconcile of a new TrainingJob by hand, with no manager running: it
// must already create the run's Job and record the backend (the
// operator's default, native) with the rest of the status, in one status
// write; a second reconcile writes nothing. A run makes no Service: its
// ranks are the subdomain of the namespace's (package rankdns).
func TestFirstReconcileCreatesTheRunAndRecordsTheBackendOnce(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	r, writes := handReconciler(t)

	tj := newTrainingJob(ns, "first", 2)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "first-r1"}, job); err != nil {
		t.Fatalf("the first reconcile created no Job: %v", err)
	}
	if job.Spec.Template.Spec.Subdomain != rankdns.Service {
		t.Errorf("the ranks' subdomain %q, want the namespace's Service %s", job.Spec.Template.Spec.Subdomain, rankdns.Service)
	}
	got, err := getTJ(t.Context(), c, tj)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Backend != trainingv1alpha1.BackendNative || got.Status.Job == nil || got.Status.Job.Name != "first-r1" || !conditions.IsTrue(got, trainingv1alpha1.ConditionCreated) {
		t.Errorf("status after the first reconcile: backend %q job %+v conditions %+v", got.Status.Backend, got.Status.Job, got.Status.Conditions)
	}
	want := map[string]int{"create jobs": 1, "patch trainingjobs/status": 1}
	if diff := cmp.Diff(want, writes.Namespace(ns).Snapshot()); diff != "" {
		t.Errorf("writes of the first reconcile (-want +got):\n%s", diff)
	}

	writes.Reset()
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if w := writes.Namespace(ns).Writes(); len(w) != 0 {
		t.Errorf("a second reconcile with nothing new wrote %d times: %v", len(w), w)
	}
}

// TestSinglePodNativeRunCreatesNoService: a run of one pod has no peers,
// so its first reconcile creates the Job alone, with no subdomain (no
// Service, no slice) and no host of one in the pod's environment.
func TestSinglePodNativeRunCreatesNoService(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	r, writes := handReconciler(t)

	tj := newTrainingJob(ns, "alone", 1)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "alone-r1"}, job); err != nil {
		t.Fatalf("the first reconcile created no Job: %v", err)
	}
	services := &corev1.ServiceList{}
	if err := c.List(t.Context(), services, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(services.Items) != 0 {
		t.Errorf("a single-pod run has Services %v, want none", services.Items)
	}
	if job.Spec.Template.Spec.Subdomain != "" {
		t.Errorf("a single-pod run's subdomain %q", job.Spec.Template.Spec.Subdomain)
	}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if strings.Contains(e.Value, "alone-r1.") || strings.Contains(e.Value, rankdns.Service) {
			t.Errorf("%s=%q names a host of a Service that does not exist", e.Name, e.Value)
		}
	}
	want := map[string]int{"create jobs": 1, "patch trainingjobs/status": 1}
	if diff := cmp.Diff(want, writes.Namespace(ns).Snapshot()); diff != "" {
		t.Errorf("writes of the first reconcile (-want +got):\n%s", diff)
	}
}

// TestNativeRanksEndingOneByOneStayRunningWithinTheWriteBudget: the ranks
// of a run end at different times, each changing the Job's counts. The
// job stays Running, with no status write, until the Job decides; the
// whole lifecycle stays within 6 writes.
func TestNativeRanksEndingOneByOneStayRunningWithinTheWriteBudget(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := native(newTrainingJob(ns, "ranks", 3))
	job := createRun(t, c, tj)
	pods := runRanks(t, c, job)
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	settle(t, c, op, ns, job)
	before := len(op.nsWrites.in(ns))
	op.nsWrites.reset()

	// Rank 2 ends first, then rank 0; the Job controller counts each.
	for n, rank := range []int{2, 0} {
		setPodStatus(t, c, pods[rank], func(s *corev1.PodStatus) {
			s.Phase = corev1.PodSucceeded
			s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			s.ContainerStatuses[0].Ready = false
			s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.Now()}}
		})
		done := int32(n + 1)
		setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
			s.Active, s.Ready, s.Succeeded = 3-done, ptr.To(3-done), done
			s.CompletedIndexes = map[int]string{1: "2", 2: "0,2"}[n+1]
		})
		settle(t, c, op, ns, job)
		consistentlyNoWrites(t, op, ns, fmt.Sprintf("no write after %d of 3 ranks ended", done))
	}
	got, err := getTJ(t.Context(), c, tj)
	if err != nil {
		t.Fatal(err)
	}
	if !conditions.IsTrue(got, trainingv1alpha1.ConditionRunning) || got.Status.Phase != trainingv1alpha1.PhaseRunning {
		t.Errorf("with 2 of 3 ranks done the job is %s, Running %+v; want Running until the Job decides", got.Status.Phase, conditions.Get(got, trainingv1alpha1.ConditionRunning))
	}

	completeJob(t, c, job, pods, metav1.NewTime(time.Now().Truncate(time.Second)))
	waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSucceeded)
	})
	testenv.WaitForEvent(t, c, tj, "Succeeded")
	settle(t, c, op, ns, tj)
	if w := op.nsWrites.in(ns); before+len(w) > 7 {
		t.Errorf("a lifecycle whose ranks ended one by one cost %d writes, want at most 7: %d until Running, then %v", before+len(w), before, w)
	}
}

// reconcileCounter counts the reconciles of one TrainingJob: each starts by
// reading it, once, through the reconciler's client. Map functions of the
// watches (refusedOwner) read it too, outside a reconcile: those are not
// counted.
type reconcileCounter struct {
	client.Client
	key   client.ObjectKey
	count atomic.Int32
}

func (c *reconcileCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*trainingv1alpha1.TrainingJob); ok && key == c.key && calledFrom(".(*Reconciler).Reconcile") {
		c.count.Add(1)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// calledFrom is whether a function whose name ends in suffix is among the
// callers, within a few frames.
func calledFrom(suffix string) bool {
	pcs := make([]uintptr, 8)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, suffix) {
			return true
		}
		if !more {
			return false
		}
	}
}

// TestNativeLifecycleTakesThreeReconciles: created, Running, Succeeded. The
// Job's creation (the reconcile that created it recorded it) and its
// changes after the run ended (Complete after SuccessCriteriaMet) wake
// none.
func TestNativeLifecycleTakesThreeReconciles(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	tj := native(newTrainingJob(ns, "three", 2))
	counter := &reconcileCounter{key: client.ObjectKeyFromObject(tj)}
	op := startOperator(t, func(r *Reconciler) {
		counter.Client = r.Client
		r.Client = counter
	})
	job := createRun(t, c, tj)
	waitTJ(t, c, tj, "Created", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionCreated)
	})
	settle(t, c, op, ns, job)
	pods := runRanks(t, c, job)
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	for _, pod := range pods {
		setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodSucceeded
			s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			s.ContainerStatuses[0].Ready = false
			s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: at}}
		})
	}
	// The Job controller decides first, and writes Complete later.
	setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
		s.Active, s.Ready, s.Succeeded, s.CompletedIndexes = 0, ptr.To[int32](0), 2, "0-1"
		batchCond(s, batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods", at)
	})
	waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSucceeded)
	})
	settle(t, c, op, ns, job)
	setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
		s.CompletionTime = &at
		batchCond(s, batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods", at)
	})
	settle(t, c, op, ns, job, tj)
	testenv.Consistently(t, "three reconciles in all", 3*time.Second, func(context.Context) error {
		if n := counter.count.Load(); n != 3 {
			return fmt.Errorf("the lifecycle took %d reconciles, want 3 (created, Running, Succeeded)", n)
		}
		return nil
	})
}

// TestNativeMountsTheFeatureStoreOnceReady: a native job waits for its
// FeatureStore without a Job, and its Job mounts the store's client
// configuration once the store is Ready.
func TestNativeMountsTheFeatureStoreOnceReady(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(featureref.GVK.GroupVersion().WithKind("FeatureStoreList"))
	crd := featureStoreCRD()
	switch err := c.Create(t.Context(), crd); {
	case err == nil:
		// Other tests start without the CRD: take it away again.
		t.Cleanup(func() {
			if err := c.Delete(context.Background(), crd); err != nil {
				t.Errorf("deleting the FeatureStore CRD: %v", err)
				return
			}
			testenv.Eventually(t, "the FeatureStore CRD is gone", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy())
				return apierrors.IsNotFound(err), nil
			})
		})
	case !apierrors.IsAlreadyExists(err):
		t.Fatal(err)
	}
	testenv.Eventually(t, "the FeatureStore CRD is served", func(ctx context.Context) (bool, error) {
		return c.List(ctx, list, client.InNamespace(ns)) == nil, nil
	})
	op := startOperator(t, nil)
	if !op.reconciler.WatchesFeatureStores {
		t.Fatal("the operator must watch FeatureStores once their CRD is installed")
	}
	store := &unstructured.Unstructured{}
	store.SetGroupVersionKind(featureref.GVK)
	store.SetNamespace(ns)
	store.SetName("customers")
	if err := c.Create(t.Context(), store); err != nil {
		t.Fatal(err)
	}

	tj := native(newTrainingJob(ns, "features", 2))
	tj.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "customers"}}}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	waitTJ(t, c, tj, "waiting for the FeatureStore to be Ready", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionFeatureStoresReady)
		return c != nil && c.Reason == commonv1alpha1.ReasonDependencyNotReady && condStatus(tj, trainingv1alpha1.ConditionCreated) == metav1.ConditionFalse
	})
	testenv.Consistently(t, "no Job while the FeatureStore is not Ready", 3*time.Second, func(ctx context.Context) error {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "features-r1"}, &batchv1.Job{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Job features-r1: %w", err)
		}
		return nil
	})

	markStoreReady(t, c, store)
	job := waitBatchJob(t, c, ns, "features-r1")
	if spec := job.Spec.Template.Spec; !hasSecretVolume(spec.Volumes, "customers-feast") {
		t.Errorf("the store's client configuration is not mounted in the Job's pods: %+v", spec.Volumes)
	}
	if l := job.Spec.Template.Labels; l[commonv1alpha1.FeatureStoreBindingLabel("customers")] != commonv1alpha1.FeatureStoreBindingLabelValue {
		t.Errorf("the Job's pods are not bound to the store, which its NetworkPolicy admits: labels %v", l)
	}
	waitTJ(t, c, tj, "FeatureStoresReady and Created", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionFeatureStoresReady) == metav1.ConditionTrue &&
			condStatus(tj, trainingv1alpha1.ConditionCreated) == metav1.ConditionTrue
	})
}

// TestNativeCleanPodPolicy: once a failure is recorded, Running deletes
// the ranks that still run and keeps the finished ones for their logs; All
// deletes every rank, the one that succeeded too, which the operator
// caches only as metadata (succeeded_pods.go); None keeps them all. The
// failure is the failed rank's: a rank that ran out of memory once and
// succeeded on its restart explains nothing.
func TestNativeCleanPodPolicy(t *testing.T) {
	c := adminClient(t)
	op := startOperator(t, nil)
	cases := map[trainingv1alpha1.CleanPodPolicy]struct{ keepFinished, keepStraggler bool }{
		trainingv1alpha1.CleanPodPolicyRunning: {keepFinished: true},
		trainingv1alpha1.CleanPodPolicyAll:     {},
		trainingv1alpha1.CleanPodPolicyNone:    {keepFinished: true, keepStraggler: true},
	}
	for policy, want := range cases {
		t.Run(string(policy), func(t *testing.T) {
			ns := createNamespace(t, c)
			tj := native(newTrainingJob(ns, "clean", 3))
			tj.Spec.RunPolicy.CleanPodPolicy = policy
			job := createRun(t, c, tj)
			pods := runRanks(t, c, job)
			// Rank 2 succeeds after a restart for lack of memory, rank 1
			// fails; the Job controller fails the Job while rank 0 still
			// runs.
			straggler, failed, succeeded := pods[0], pods[1], pods[2]
			setPodStatus(t, c, succeeded, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodSucceeded
				s.ContainerStatuses[0].RestartCount = 1
				s.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.Now()}}
				s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.Now()}}
			})
			setPodStatus(t, c, failed, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.Now()}}
			})
			// The Job controller fails the Job after it saw the pod fail;
			// the operator's watches of the two need not agree on that
			// order, so the test lets its cache see the pod first.
			settle(t, c, op, ns, failed)
			failBatchJob(t, c, job)
			got := waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
				return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
			})
			if f := got.Status.Failure; f == nil || f.Pod != failed.Name || f.ExitCode != 1 || f.Class != trainingv1alpha1.FailureClassUser {
				t.Errorf("failure %+v, want rank 1's exit code 1", got.Status.Failure)
			}
			for pod, keep := range map[*corev1.Pod]bool{failed: want.keepFinished, succeeded: want.keepFinished, straggler: want.keepStraggler} {
				if keep {
					testenv.Consistently(t, pod.Name+" stays", 3*time.Second, func(ctx context.Context) error {
						return c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
					})
				} else {
					testenv.WaitGone(t, c, pod)
				}
			}
		})
	}
}

// TestNativeCleanPodPolicyAllAfterAnOutage: a job whose ranks succeeded
// while no operator ran has them deleted by the next one, which finds them
// in its cold cache of pods that succeeded; a job with the policy Running
// beside it keeps its ranks.
func TestNativeCleanPodPolicyAllAfterAnOutage(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)
	jobs := map[trainingv1alpha1.CleanPodPolicy]*trainingv1alpha1.TrainingJob{}
	ranks := map[trainingv1alpha1.CleanPodPolicy][]*corev1.Pod{}
	children := map[trainingv1alpha1.CleanPodPolicy]*batchv1.Job{}
	for _, policy := range []trainingv1alpha1.CleanPodPolicy{trainingv1alpha1.CleanPodPolicyAll, trainingv1alpha1.CleanPodPolicyRunning} {
		tj := native(newTrainingJob(ns, "outage-"+strings.ToLower(string(policy)), 2))
		tj.Spec.RunPolicy.CleanPodPolicy = policy
		children[policy] = createRun(t, c, tj)
		ranks[policy] = runRanks(t, c, children[policy])
		waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
			return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
		})
		jobs[policy] = tj
	}
	op.stop(t)
	for policy, job := range children {
		completeJob(t, c, job, ranks[policy], metav1.NewTime(time.Now().Truncate(time.Second)))
	}
	startOperator(t, nil)
	for policy, tj := range jobs {
		waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
			return conditions.IsTrue(tj, commonv1alpha1.ConditionSucceeded)
		})
		for _, pod := range ranks[policy] {
			if policy == trainingv1alpha1.CleanPodPolicyAll {
				testenv.WaitGone(t, c, pod)
				continue
			}
			testenv.Consistently(t, pod.Name+" stays", 2*time.Second, func(ctx context.Context) error {
				return c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
			})
		}
	}
}

// TestNativeRankDeletedThatSucceededIsTheCause: a rank deleted in the
// middle of a run, whose program checkpoints and exits 0 on SIGTERM,
// succeeds and leaves the cache of pods; its peer crashes for the lost
// rank. The failure is still the deletion (Infrastructure, so it resumes),
// read from the metadata the operator keeps of pods that succeeded.
func TestNativeRankDeletedThatSucceededIsTheCause(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)
	tj := native(newTrainingJob(ns, "sigterm", 2))
	job := createRun(t, c, tj)
	pods := runRanks(t, c, job)
	peer, deleted := pods[0], pods[1]
	// Bound to a node, a pod's deletion waits for its kubelet.
	if err := c.SubResource("binding").Create(t.Context(), deleted, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: deleted.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), deleted); err != nil {
		t.Fatal(err)
	}
	setPodStatus(t, c, deleted, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.Now()}}
	})
	// The peer notices later, and exits non-zero.
	setPodStatus(t, c, peer, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		later := metav1.NewTime(time.Now().Add(2 * time.Second))
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: later}}
	})
	failBatchJob(t, c, job)
	got := waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	if f := got.Status.Failure; f == nil || f.Cause != failure.CausePodDeleted || f.Pod != deleted.Name || f.Class != trainingv1alpha1.FailureClassInfrastructure {
		t.Errorf("failure %+v, want the deletion of %s", got.Status.Failure, deleted.Name)
	}
}

// handReconciler is a Reconciler for reconciles run by hand, with no
// manager, whose writes are counted.
func handReconciler(t *testing.T) (*Reconciler, *testenv.WriteCounter) {
	t.Helper()
	writes := testenv.NewWriteCounter()
	oc, err := client.New(writes.Wrap(operatorConfig(t)), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := backend.NewRegistry(trainingv1alpha1.BackendNative, nativejob.NewBackend(testSettings), kubeflowjob.NewBackend(testSettings, nil))
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: oc, APIReader: oc, Recorder: record.NewFakeRecorder(100), Settings: testSettings, Backends: reg, Clock: clock.RealClock{}, Metrics: NewMetrics()}
	r.runner = r.newRunner()
	return r, writes
}

// TestNativeRanksArePublishedByTheOperator: the namespace's Service has no
// selector, and the operator writes the run's EndpointSlice that gives
// each rank its host name (<job>-<index>.<service>) once it has an
// address: a create and few updates (paced), none of the legacy
// Endpoints, nothing for a pod that only carries the run's labels, and no
// slice once the ranks ended; a slice somebody changed or deleted, and the
// Service deleted, are made right again, and a restarted operator writes
// nothing. The operator acts as the chart's ServiceAccount, so this also
// proves the chart grants what it needs.
func TestNativeRanksArePublishedByTheOperator(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := native(newTrainingJob(ns, "ranks", 3))
	job := createRun(t, c, tj)
	svc := waitService(t, c, job)
	if svc.Spec.Selector != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("Service selector %v clusterIP %q: want headless with no selector", svc.Spec.Selector, svc.Spec.ClusterIP)
	}
	pods := runRanks(t, c, job)
	// A pod with the run's labels, subdomain and rank 0's host name that
	// the Job does not control.
	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "impostor", Labels: job.Spec.Template.Labels,
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}},
		Spec: job.Spec.Template.Spec,
	}
	impostor.Spec.Hostname = "ranks-r1-0"
	if err := c.Create(t.Context(), impostor); err != nil {
		t.Fatal(err)
	}
	op.nsWrites.reset()
	for i, pod := range append(pods, impostor) {
		setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodRunning
			s.PodIP, s.PodIPs = fmt.Sprintf("10.1.0.%d", i+1), []corev1.PodIP{{IP: fmt.Sprintf("10.1.0.%d", i+1)}}
		})
	}
	slice := &discoveryv1.EndpointSlice{}
	want := "[ranks-r1-0=10.1.0.1 ranks-r1-1=10.1.0.2 ranks-r1-2=10.1.0.3]"
	testenv.Eventually(t, "the ranks' EndpointSlice", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), slice)
		return err == nil && fmt.Sprint(sliceHosts(slice)) == want, client.IgnoreNotFound(err)
	})
	if slice.Labels[discoveryv1.LabelServiceName] != svc.Name || !metav1.IsControlledBy(slice, job) {
		t.Errorf("slice labels %v owners %v: want the Service's name, controlled by the run's Job", slice.Labels, slice.OwnerReferences)
	}
	op.Writes.Namespace(ns).WaitQuiet(t, time.Second)
	var sliceWrites []testenv.Write
	for _, w := range op.nsWrites.in(ns) {
		if w.Resource == "endpointslices" || w.Resource == "endpoints" {
			sliceWrites = append(sliceWrites, w)
		}
	}
	// A write from a cache that lags the operator's own last one fails and
	// is retried: at most one more per rank.
	if len(sliceWrites) < 1 || len(sliceWrites) > 6 || sliceWrites[0].Verb != "create" {
		t.Errorf("three ranks getting addresses cost %d slice writes, want a create and at most two writes per later rank: %v", len(sliceWrites), sliceWrites)
	}
	eps := &corev1.Endpoints{} //nolint:staticcheck // the deprecated object a selector made; the test shows it is gone
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(job), eps); !apierrors.IsNotFound(err) {
		t.Errorf("an Endpoints object exists for the run (err %v): the legacy API costs writes nobody reads", err)
	}

	// Somebody points rank 0's name elsewhere: the operator puts it back.
	hijacked := slice.DeepCopy()
	hijacked.Endpoints[0].Addresses = []string{"10.9.9.9"}
	if err := c.Update(t.Context(), hijacked); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "rank 0's name restored", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), slice)
		return err == nil && fmt.Sprint(sliceHosts(slice)) == want, err
	})

	// Somebody deletes the slice: the operator makes it again.
	if err := c.Delete(t.Context(), slice); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the ranks' EndpointSlice made again", func(ctx context.Context) (bool, error) {
		again := &discoveryv1.EndpointSlice{}
		err := c.Get(ctx, client.ObjectKeyFromObject(job), again)
		return err == nil && again.UID != slice.UID && fmt.Sprint(sliceHosts(again)) == want, client.IgnoreNotFound(err)
	})
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(job), slice); err != nil {
		t.Fatal(err)
	}

	// Somebody deletes the namespace's Service: the operator makes it
	// again, and the run's slice, its own, stays.
	if err := c.Delete(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the ranks' Service made again", func(ctx context.Context) (bool, error) {
		again := &corev1.Service{}
		err := c.Get(ctx, client.ObjectKeyFromObject(svc), again)
		return err == nil && again.UID != svc.UID && rankdns.Published(again, operatorName), client.IgnoreNotFound(err)
	})
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(slice), slice); err != nil || fmt.Sprint(sliceHosts(slice)) != want {
		t.Errorf("the run's slice after the Service came back: %v (err %v)", sliceHosts(slice), err)
	}

	// A restarted operator finds the names published and writes nothing.
	op.stop(t)
	op = startOperator(t, nil)
	settle(t, c, op, ns, tj, slice)
	for _, w := range op.nsWrites.in(ns) {
		if w.Resource == "endpointslices" {
			t.Errorf("a restarted operator rewrote the published names: %v", w)
		}
	}

	completeJob(t, c, job, pods, metav1.Now())
	testenv.WaitGone(t, c, slice)
}

// TestNativeRanksArePublishedTogether: a run's ranks are published in one
// write, once every rank has an address. The pacing period is a minute
// here, so a slice written before the last rank had its address could
// not be completed within the test.
func TestNativeRanksArePublishedTogether(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, func(r *Reconciler) { r.RankNamesPeriod = time.Minute })

	job := createRun(t, c, native(newTrainingJob(ns, "together", 3)))
	waitService(t, c, job)
	pods := runRanks(t, c, job)
	address := func(i int) {
		setPodStatus(t, c, pods[i], func(s *corev1.PodStatus) {
			s.Phase = corev1.PodRunning
			s.PodIP, s.PodIPs = fmt.Sprintf("10.3.0.%d", i+1), []corev1.PodIP{{IP: fmt.Sprintf("10.3.0.%d", i+1)}}
		})
	}
	address(0)
	address(1)
	// The operator's cache holds both, and it wrote nothing for a second.
	settle(t, c, op, ns, pods[0], pods[1])
	slice := &discoveryv1.EndpointSlice{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(job), slice); !apierrors.IsNotFound(err) {
		t.Fatalf("two of three ranks were published (err %v): %v", err, sliceHosts(slice))
	}
	op.nsWrites.reset()
	address(2)
	testenv.Eventually(t, "the ranks' EndpointSlice", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), slice)
		return err == nil, client.IgnoreNotFound(err)
	})
	if got, want := fmt.Sprint(sliceHosts(slice)), "[together-r1-0=10.3.0.1 together-r1-1=10.3.0.2 together-r1-2=10.3.0.3]"; got != want {
		t.Errorf("the slice names %s, want %s", got, want)
	}
	op.Writes.Namespace(ns).WaitQuiet(t, time.Second)
	var sliceWrites []string
	for _, w := range op.nsWrites.in(ns) {
		if w.Resource == "endpointslices" {
			sliceWrites = append(sliceWrites, w.Verb)
		}
	}
	if fmt.Sprint(sliceWrites) != "[create]" {
		t.Errorf("publishing three ranks cost the slice writes %v, want one create", sliceWrites)
	}
}

// TestNativeRankNamesThatCannotBePublishedAreReported: a slice of the
// run's name that somebody else made is never overwritten; the operator
// says on the run's Job and on the TrainingJob why the ranks have no
// names.
func TestNativeRankNamesThatCannotBePublishedAreReported(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	foreign := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "squat-r1", Labels: map[string]string{"owner": "someone"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if err := c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	tj := native(newTrainingJob(ns, "squat", 2))
	job := createRun(t, c, tj)
	pods := runRanks(t, c, job)
	for i, pod := range pods {
		setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
			s.PodIP, s.PodIPs = fmt.Sprintf("10.2.0.%d", i+1), []corev1.PodIP{{IP: fmt.Sprintf("10.2.0.%d", i+1)}}
		})
	}
	// On the Job, and on the TrainingJob, whose status stays Running.
	for _, obj := range []client.Object{job, tj} {
		ev := testenv.WaitForEvent(t, c, obj, rankdns.ReasonNotPublished)
		if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "EndpointSlice "+ns+"/squat-r1 exists and does not belong to the run squat-r1") {
			t.Errorf("event on the %T: %s %q: want a Warning that names the conflict", obj, ev.Type, ev.Message)
		}
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(foreign), foreign); err != nil || len(foreign.Endpoints) != 0 || foreign.Labels["owner"] != "someone" {
		t.Errorf("the foreign slice was changed (err %v): %+v", err, foreign)
	}
}

func sliceHosts(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, e := range s.Endpoints {
		out = append(out, ptr.Deref(e.Hostname, "")+"="+strings.Join(e.Addresses, ","))
	}
	return out
}

// TestRunPodsReadsTheRunsPodsFromTheIndex: a reconcile reads its run's
// pods through the cache's run index, and gets those of that run of that
// TrainingJob only; a Reconciler called by hand gets the same by labels.
func TestRunPodsReadsTheRunsPodsFromTheIndex(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)
	if !op.reconciler.runPodsIndexed {
		t.Fatal("the operator's reconciler reads pods without the run index")
	}
	for _, p := range []struct {
		name, job string
		run       int32
	}{{"a1-x", "a", 1}, {"a1-y", "a", 1}, {"a2-x", "a", 2}, {"b1-x", "b", 1}, {"ab1-x", "ab", 1}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.name, Labels: backend.Labels(operatorName, p.job, p.run)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}
		if err := c.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
	}
	names := func(pods []corev1.Pod) string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return fmt.Sprint(out)
	}
	tj := newTrainingJob(ns, "a", 1)
	testenv.Eventually(t, "the cache holds the pods", func(ctx context.Context) (bool, error) {
		pods, err := op.reconciler.runPods(ctx, tj, 2)
		return err == nil && len(pods) == 1, err
	})
	hand, _ := handReconciler(t)
	for run, want := range map[int32]string{1: "[a1-x a1-y]", 2: "[a2-x]", 3: "[]"} {
		got, err := op.reconciler.runPods(t.Context(), tj, run)
		if err != nil || names(got) != want {
			t.Errorf("run %d from the index: %s (err %v), want %s", run, names(got), err, want)
		}
		got, err = hand.runPods(t.Context(), tj, run)
		if err != nil || names(got) != want {
			t.Errorf("run %d by labels: %s (err %v), want %s", run, names(got), err, want)
		}
	}
}

// TestNativeServiceNameTakenIsReported: a Service of the ranks' Service
// name that is not the operator's is never used or touched. With a
// selector of its own, cluster DNS would give its pods the ranks' host
// names; the job's events say so, once, since the run's status stays its
// child's. Once it is gone, the operator makes its own.
func TestNativeServiceNameTakenIsReported(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	foreign := createImpostorService(t, c, ns, rankdns.Service)
	tj := native(newTrainingJob(ns, "taken", 2))
	job := createRun(t, c, tj)
	pods := runRanks(t, c, job)
	for i, pod := range pods {
		setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
			s.PodIP, s.PodIPs = fmt.Sprintf("10.4.0.%d", i+1), []corev1.PodIP{{IP: fmt.Sprintf("10.4.0.%d", i+1)}}
		})
	}
	ev := testenv.WaitForEvent(t, c, tj, rankdns.ReasonNotPublished)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "Service "+ns+"/"+rankdns.Service+" exists and does not belong to the "+operatorName) {
		t.Errorf("event %s %q", ev.Type, ev.Message)
	}
	checkUntouched(t, c, foreign)
	slices := &discoveryv1.EndpointSliceList{}
	if err := c.List(t.Context(), slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelManagedBy: rankdns.ManagedBy}); err != nil || len(slices.Items) != 0 {
		t.Errorf("the operator published ranks in a Service not its own (err %v): %d slices", err, len(slices.Items))
	}
	// Told once, however often the ranks change.
	setPodStatus(t, c, pods[0], func(s *corev1.PodStatus) { s.PodIP, s.PodIPs = "10.4.1.1", []corev1.PodIP{{IP: "10.4.1.1"}} })
	settle(t, c, op, ns, pods[0])
	events := &corev1.EventList{}
	testenv.Eventually(t, "the warning counted", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, events, client.InNamespace(ns), client.MatchingFields{"reason": rankdns.ReasonNotPublished, "involvedObject.name": tj.Name})
		return err == nil && len(events.Items) == 1, err
	})
	if n := events.Items[0].Count; n > 1 {
		t.Errorf("the Service's name taken was told %d times on the job", n)
	}
}

// TestNativeRunOfAnEarlierVersionKeepsItsOwnService: a run that an earlier
// version started has its ranks in a headless Service of its own, named as
// its Job; after the upgrade the operator still publishes them there, in a
// slice that Service controls, and makes no use of the namespace's.
func TestNativeRunOfAnEarlierVersionKeepsItsOwnService(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	labels := backend.Labels(operatorName, "old", 1)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-r1", Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Subdomain: "old-r1", Containers: []corev1.Container{{Name: "pytorch", Image: "train"}},
			}},
		},
	}
	if err := c.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-r1", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "pytorchjob-port", Port: 23456}}},
	}
	if err := c.Create(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	for i, pod := range runRanks(t, c, job) {
		setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
			s.PodIP, s.PodIPs = fmt.Sprintf("10.5.0.%d", i+1), []corev1.PodIP{{IP: fmt.Sprintf("10.5.0.%d", i+1)}}
		})
	}
	slice := &discoveryv1.EndpointSlice{}
	testenv.Eventually(t, "the earlier run's EndpointSlice", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), slice)
		return err == nil && fmt.Sprint(sliceHosts(slice)) == "[old-r1-0=10.5.0.1 old-r1-1=10.5.0.2]", client.IgnoreNotFound(err)
	})
	if slice.Labels[discoveryv1.LabelServiceName] != "old-r1" || !metav1.IsControlledBy(slice, svc) || len(slice.Ports) != 1 || *slice.Ports[0].Port != 23456 {
		t.Errorf("slice labels %v owners %v ports %v: want the run's own Service's, with its port", slice.Labels, slice.OwnerReferences, slice.Ports)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: rankdns.Service}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the namespace's Service was made for a run that does not use it (err %v)", err)
	}
}

// TestNativeRanksServiceGoesWithTheLastRunThatUsesIt: the namespace's
// Service for the ranks is owned by nobody, and the operator deletes it
// once no Job of the namespace has its ranks there: deleting every
// TrainingJob leaves nothing of the platform's behind. A run of one pod
// neither needs it nor keeps it.
func TestNativeRanksServiceGoesWithTheLastRunThatUsesIt(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	first := native(newTrainingJob(ns, "first", 2))
	second := native(newTrainingJob(ns, "second", 2))
	alone := native(newTrainingJob(ns, "alone", 1))
	jobs := []*batchv1.Job{createRun(t, c, first), createRun(t, c, second), createRun(t, c, alone)}
	svc := waitService(t, c, jobs[0])

	if err := c.Delete(t.Context(), first, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, jobs[0])
	testenv.WaitGone(t, c, first)
	// The second run still has its ranks there.
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(svc), &corev1.Service{}); err != nil {
		t.Fatalf("the ranks' Service went while a run needs it: %v", err)
	}

	if err := c.Delete(t.Context(), second, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, jobs[1])
	testenv.WaitGone(t, c, svc)
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(jobs[2]), &batchv1.Job{}); err != nil {
		t.Errorf("the single-pod run's Job: %v", err)
	}
}

// TestNativeRanksServiceOutlivesItsRunsOnlyWhileTheOperatorIsDown: the
// last TrainingJob of a namespace is deleted while the operator is down,
// so no Job's deletion tells it the Service is no longer needed. Its
// first look at the namespace's Service after the start finds no run
// there and deletes it.
func TestNativeRanksServiceOutlivesItsRunsOnlyWhileTheOperatorIsDown(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)
	tj := native(newTrainingJob(ns, "last", 2))
	job := createRun(t, c, tj)
	svc := waitService(t, c, job)

	op.stop(t)
	if err := c.Delete(t.Context(), tj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, job)
	testenv.WaitGone(t, c, tj)
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(svc), &corev1.Service{}); err != nil {
		t.Fatalf("the ranks' Service went while the operator was down: %v", err)
	}

	startOperator(t, nil)
	testenv.WaitGone(t, c, svc)
}

// TestNativeRanksServiceRefusedIsReported: a namespace whose quota allows
// no Service refuses the ranks' Service; the job's events say why its
// ranks have no names, rather than the operator retrying in silence.
func TestNativeRanksServiceRefusedIsReported(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-services"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}},
	}
	if err := c.Create(t.Context(), quota); err != nil {
		t.Fatal(err)
	}
	// What the quota controller (not run here) records, and admission
	// reads.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}}
	if err := c.Status().Update(t.Context(), quota); err != nil {
		t.Fatal(err)
	}
	startOperator(t, nil)

	tj := native(newTrainingJob(ns, "quota", 2))
	createRun(t, c, tj)
	ev := testenv.WaitForEvent(t, c, tj, rankdns.ReasonNotPublished)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "creating the ranks' Service "+rankdns.Service) || !strings.Contains(ev.Message, "exceeded quota") {
		t.Errorf("event %s %q: want a Warning with the quota's refusal", ev.Type, ev.Message)
	}
}

// createImpostorService creates a headless Service of name in ns that is
// not the operator's, with a selector of its own: cluster DNS would give
// its pods the host names of whatever the operator meant the name for.
func createImpostorService(t *testing.T, c client.Client, ns, name string) *corev1.Service {
	t.Helper()
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": "impostor"},
			Ports:     []corev1.ServicePort{{Name: "x", Port: 1234}},
		},
	}
	if err := c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	return foreign
}

// checkUntouched fails unless the impostor Service is as it was made.
func checkUntouched(t *testing.T, c client.Client, foreign *corev1.Service) {
	t.Helper()
	got := &corev1.Service{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || len(got.Labels) != 0 || got.Spec.Selector["app"] != "impostor" {
		t.Errorf("the foreign Service was changed: owners %v labels %v selector %v", got.OwnerReferences, got.Labels, got.Spec.Selector)
	}
}
