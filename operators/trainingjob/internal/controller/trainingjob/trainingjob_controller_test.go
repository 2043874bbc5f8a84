package trainingjob

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func condStatus(tj *trainingv1alpha1.TrainingJob, t string) metav1.ConditionStatus {
	if c := conditions.Get(tj, t); c != nil {
		return c.Status
	}
	return ""
}

// hasConds reports whether every listed condition has the wanted status
// ("" for absent) and was computed for the current generation.
func hasConds(tj *trainingv1alpha1.TrainingJob, want map[string]metav1.ConditionStatus) bool {
	for t, s := range want {
		if condStatus(tj, t) != s {
			return false
		}
		if s != "" && !conditions.IsCurrent(tj, t) {
			return false
		}
	}
	return tj.Status.ObservedGeneration == tj.Generation
}

func TestLifecycleCreatedRunningSucceeded(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := newTrainingJob(ns, "mnist", 3)
	tj.Spec.Resources = &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 2}}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "mnist-r1")
	if !metav1.IsControlledBy(job, tj) {
		t.Errorf("PyTorchJob owner references %v, want controlled by the TrainingJob", job.OwnerReferences)
	}
	if got := job.Labels; got["app.kubernetes.io/managed-by"] != operatorName || got[trainingv1alpha1.LabelJobName] != "mnist" || got[trainingv1alpha1.LabelRun] != "1" {
		t.Errorf("PyTorchJob labels %v", got)
	}
	if got := *job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Replicas; got != 2 {
		t.Errorf("Worker replicas %d, want 2", got)
	}
	// The pod template's labels survive the API server's pruning: the
	// Kubeflow CRD is generated with generateEmbeddedObjectMeta.
	if got := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Labels[trainingv1alpha1.LabelJobName]; got != "mnist" {
		t.Errorf("pod template label %s = %q, want mnist", trainingv1alpha1.LabelJobName, got)
	}
	if got := job.Spec.RunPolicy.CleanPodPolicy; got == nil || *got != kubeflowv1.CleanPodPolicyNone {
		t.Errorf("Kubeflow cleanPodPolicy %v, want None (the operator applies the user's policy)", got)
	}

	got := waitTJ(t, c, tj, "Created and Reconciling", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			trainingv1alpha1.ConditionCreated:            metav1.ConditionTrue,
			commonv1alpha1.ConditionReconciling:          metav1.ConditionTrue,
			trainingv1alpha1.ConditionRunning:            metav1.ConditionFalse,
			commonv1alpha1.ConditionSuspended:            metav1.ConditionFalse,
			commonv1alpha1.ConditionSucceeded:            "",
			commonv1alpha1.ConditionReady:                "",
			trainingv1alpha1.ConditionFeatureStoresReady: "",
		})
	})
	if got.Status.Phase != trainingv1alpha1.PhasePending || got.Status.Run != 1 ||
		got.Status.Job == nil || got.Status.Job.Name != "mnist-r1" || got.Status.Job.Kind != "PyTorchJob" {
		t.Errorf("status after create: %+v", got.Status)
	}

	// Kubeflow starts the pods.
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobCreated, corev1.ConditionTrue, "PyTorchJobCreated", "created")
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "PyTorchJob mnist-r1 is running.")
		s.ReplicaStatuses = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{
			kubeflowv1.PyTorchJobReplicaTypeMaster: {Active: 1},
			kubeflowv1.PyTorchJobReplicaTypeWorker: {Active: 2},
		}
	})
	got = waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			trainingv1alpha1.ConditionRunning:   metav1.ConditionTrue,
			commonv1alpha1.ConditionReconciling: "",
		})
	})
	// Pod counts change with every pod; they are recorded when the run
	// ends, not each time (a status write each).
	if len(got.Status.Roles) != 0 {
		t.Errorf("roles %+v while running, want none until the run ends", got.Status.Roles)
	}
	if got.Status.StartTime == nil || got.Status.Phase != trainingv1alpha1.PhaseRunning {
		t.Errorf("status while running: %+v", got.Status)
	}

	// The master finishes.
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionFalse, "PyTorchJobRunning", "")
		jobCond(s, kubeflowv1.JobSucceeded, corev1.ConditionTrue, "PyTorchJobSucceeded", "PyTorchJob mnist-r1 is successfully completed.")
		s.ReplicaStatuses = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{
			kubeflowv1.PyTorchJobReplicaTypeMaster: {Succeeded: 1},
			kubeflowv1.PyTorchJobReplicaTypeWorker: {Succeeded: 2},
		}
		s.CompletionTime = ptr.To(metav1.Now())
	})
	got = waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			commonv1alpha1.ConditionSucceeded:   metav1.ConditionTrue,
			commonv1alpha1.ConditionFailed:      metav1.ConditionFalse,
			trainingv1alpha1.ConditionRunning:   metav1.ConditionFalse,
			commonv1alpha1.ConditionReconciling: "",
			commonv1alpha1.ConditionStalled:     "",
		})
	})
	if got.Status.Phase != trainingv1alpha1.PhaseSucceeded || got.Status.CompletionTime == nil || got.Status.Duration == "" {
		t.Errorf("status after success: %+v", got.Status)
	}
	wantRoles := []trainingv1alpha1.RoleStatus{{Name: "Master", Succeeded: 1}, {Name: "Worker", Succeeded: 2}}
	if diff := cmp.Diff(wantRoles, got.Status.Roles); diff != "" {
		t.Errorf("roles at the end (-want +got):\n%s", diff)
	}
	testenv.WaitForEvent(t, c, tj, "Succeeded")
}

// TestKubeflowLifecycleStepByStepWithinTheWriteBudget acts out Kubeflow on
// a quiet cluster, where the operator sees every step on its own: the job
// created with all-zero counts, the pods becoming active one by one,
// Running, the workers ending one by one, then Succeeded. The whole
// lifecycle costs at most 6 operator writes, as under load.
func TestKubeflowLifecycleStepByStepWithinTheWriteBudget(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := newTrainingJob(ns, "steps", 3)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "steps-r1")
	waitTJ(t, c, tj, "Created", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionCreated) == metav1.ConditionTrue
	})
	master, worker := kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker
	steps := []func(*kubeflowv1.JobStatus){
		func(s *kubeflowv1.JobStatus) {
			jobCond(s, kubeflowv1.JobCreated, corev1.ConditionTrue, "PyTorchJobCreated", "created")
			s.ReplicaStatuses = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{master: {}, worker: {}}
		},
		func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses[master].Active = 1 },
		func(s *kubeflowv1.JobStatus) {
			s.StartTime = ptr.To(metav1.Now())
			jobCond(s, kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "PyTorchJob steps-r1 is running.")
		},
		func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses[worker].Active = 1 },
		func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses[worker].Active = 2 },
		func(s *kubeflowv1.JobStatus) {
			s.ReplicaStatuses[worker].Active, s.ReplicaStatuses[worker].Succeeded = 1, 1
		},
		func(s *kubeflowv1.JobStatus) {
			s.ReplicaStatuses[worker].Active, s.ReplicaStatuses[worker].Succeeded = 0, 2
		},
		func(s *kubeflowv1.JobStatus) {
			s.ReplicaStatuses[master].Active, s.ReplicaStatuses[master].Succeeded = 0, 1
			jobCond(s, kubeflowv1.JobRunning, corev1.ConditionFalse, "PyTorchJobRunning", "")
			jobCond(s, kubeflowv1.JobSucceeded, corev1.ConditionTrue, "PyTorchJobSucceeded", "PyTorchJob steps-r1 is successfully completed.")
			s.CompletionTime = ptr.To(metav1.Now())
		},
	}
	for _, step := range steps {
		setJobStatus(t, c, job, step)
		// The operator sees this step before the next one comes.
		settle(t, c, op, ns, job)
	}
	got := waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionSucceeded) == metav1.ConditionTrue
	})
	if want := []trainingv1alpha1.RoleStatus{{Name: "Master", Succeeded: 1}, {Name: "Worker", Succeeded: 2}}; !cmp.Equal(want, got.Status.Roles) {
		t.Errorf("roles %+v, want %+v", got.Status.Roles, want)
	}
	testenv.WaitForEvent(t, c, tj, "Succeeded")
	settle(t, c, op, ns, tj)
	// One more than the job's own: its NetworkPolicy.
	if w := op.nsWrites.in(ns); len(w) > 7 {
		t.Errorf("a quiet Kubeflow lifecycle cost %d writes, want at most 7: %v", len(w), w)
	}
}

func TestFailureSurfacesTerminationMessageThenCleansPods(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := newTrainingJob(ns, "oom", 2)
	tj.Spec.RunPolicy.CleanPodPolicy = trainingv1alpha1.CleanPodPolicyAll
	tj.Spec.Resources = &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "oom-r1")

	// Act out Kubeflow creating the pods from the job's templates: one
	// cannot pull its image, the other crashes.
	pods := map[string]*corev1.Pod{}
	for _, role := range []kubeflowv1.ReplicaType{kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker} {
		tmpl := job.Spec.PyTorchReplicaSpecs[role].Template
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "oom-r1-" + strings.ToLower(string(role)) + "-0",
				Labels:          tmpl.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, kubeflowv1.GroupVersion.WithKind("PyTorchJob"))},
			},
			Spec: tmpl.Spec,
		}
		if err := c.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		pods[string(role)] = pod
	}
	worker := pods["Worker"]
	worker.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "pytorch", Image: tj.Spec.Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}},
	}}}
	if err := c.Status().Update(t.Context(), worker); err != nil {
		t.Fatal(err)
	}
	ev := testenv.WaitForEvent(t, c, tj, "PodImagePullBackOff")
	if !strings.Contains(ev.Message, worker.Name) || ev.Type != corev1.EventTypeWarning {
		t.Errorf("re-emitted pod event: %s %q", ev.Type, ev.Message)
	}

	master := pods["Master"]
	master.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "pytorch", Image: tj.Spec.Image, RestartCount: 1,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.Now(),
			Message: "epoch 1\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
		}},
	}}}
	if err := c.Status().Update(t.Context(), master); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForEvent(t, c, tj, "PodOOMKilled")

	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobCreated, corev1.ConditionTrue, "PyTorchJobCreated", "created")
		jobCond(s, kubeflowv1.JobFailed, corev1.ConditionTrue, "PyTorchJobFailed", "PyTorchJob oom-r1 is failed because 1 Master replica(s) failed.")
	})
	got := waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			commonv1alpha1.ConditionFailed:      metav1.ConditionTrue,
			commonv1alpha1.ConditionSucceeded:   metav1.ConditionFalse,
			commonv1alpha1.ConditionReconciling: "",
		})
	})
	want := &trainingv1alpha1.Failure{
		Reason: "PyTorchJobFailed", Message: "PyTorchJob oom-r1 is failed because 1 Master replica(s) failed.",
		Class: trainingv1alpha1.FailureClassUser, Cause: "OOMKilled", MemoryLimit: "4Gi",
		Pod: master.Name, Container: "pytorch", ExitCode: 137,
		TerminationMessage: "epoch 1\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
	}
	if diff := cmp.Diff(want, got.Status.Failure); diff != "" {
		t.Errorf("failure (-want +got):\n%s", diff)
	}
	if msg := conditions.Get(got, commonv1alpha1.ConditionFailed).Message; !strings.Contains(msg, "CUDA out of memory") || !strings.Contains(msg, "OOMKilled (memory limit 4Gi)") {
		t.Errorf("Failed condition message %q lacks the termination message", msg)
	}
	ev = testenv.WaitForEvent(t, c, tj, "Failed")
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("Failed event type %s", ev.Type)
	}

	// Only once the outcome is recorded does cleanPodPolicy All delete the
	// pods.
	for _, p := range pods {
		testenv.WaitGone(t, c, p)
	}
	// The recorded failure outlives the pods.
	got, err := getTJ(t.Context(), c, tj)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.Status.Failure); diff != "" {
		t.Errorf("failure after the pods were cleaned (-want +got):\n%s", diff)
	}
}

func TestCleanPodPolicyRunningKeepsFinishedPods(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := newTrainingJob(ns, "keep", 2)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "keep-r1")
	mk := func(name string, phase corev1.PodPhase) *corev1.Pod {
		tmpl := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		if err := c.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = phase
		if err := c.Status().Update(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	done := mk("keep-r1-master-0", corev1.PodSucceeded)
	straggler := mk("keep-r1-worker-0", corev1.PodRunning)
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobSucceeded, corev1.ConditionTrue, "PyTorchJobSucceeded", "done")
	})
	waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionSucceeded) == metav1.ConditionTrue
	})
	testenv.WaitGone(t, c, straggler)
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(done), &corev1.Pod{}); err != nil {
		t.Errorf("the succeeded pod must stay for its logs: %v", err)
	}
}

func TestSuspendAndResume(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := newTrainingJob(ns, "pause", 1)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "pause-r1")
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "running")
	})
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionRunning) == metav1.ConditionTrue
	})

	setSuspend := func(v bool) {
		testenv.Eventually(t, "set spec.suspend", func(ctx context.Context) (bool, error) {
			latest, err := getTJ(ctx, c, tj)
			if err != nil {
				return false, err
			}
			latest.Spec.Suspend = v
			err = c.Update(ctx, latest)
			return err == nil, client.IgnoreAlreadyExists(ignoreConflict(err))
		})
	}
	jobSuspend := func(want bool) {
		testenv.Eventually(t, "PyTorchJob runPolicy.suspend follows spec.suspend", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
				return false, err
			}
			return ptr.Deref(job.Spec.RunPolicy.Suspend, false) == want, nil
		})
	}

	setSuspend(true)
	jobSuspend(true)
	waitTJ(t, c, tj, "Suspending", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			commonv1alpha1.ConditionReconciling: metav1.ConditionTrue,
			commonv1alpha1.ConditionSuspended:   metav1.ConditionFalse,
		})
	})
	// Kubeflow deletes the pods and reports the job suspended.
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionFalse, "PyTorchJobSuspended", "")
		jobCond(s, kubeflowv1.JobSuspended, corev1.ConditionTrue, "PyTorchJobSuspended", "PyTorchJob pause-r1 is suspended.")
	})
	got := waitTJ(t, c, tj, "Suspended", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			commonv1alpha1.ConditionSuspended:   metav1.ConditionTrue,
			trainingv1alpha1.ConditionRunning:   metav1.ConditionFalse,
			commonv1alpha1.ConditionReconciling: "",
		})
	})
	if got.Status.Phase != trainingv1alpha1.PhaseSuspended {
		t.Errorf("phase %s, want Suspended", got.Status.Phase)
	}
	testenv.WaitForEvent(t, c, tj, "Suspended")

	setSuspend(false)
	jobSuspend(false)
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobSuspended, corev1.ConditionFalse, "PyTorchJobResumed", "")
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "running again")
	})
	waitTJ(t, c, tj, "Running again", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			commonv1alpha1.ConditionSuspended: metav1.ConditionFalse,
			trainingv1alpha1.ConditionRunning: metav1.ConditionTrue,
		})
	})
	testenv.WaitForEvent(t, c, tj, "Resumed")
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// succeed acts out a Kubeflow job that succeeded and waits until the
// TrainingJob recorded it.
func succeed(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
	t.Helper()
	job := waitPyTorchJob(t, c, tj.Namespace, tj.Name+"-r1")
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "running")
	})
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionRunning) == metav1.ConditionTrue
	})
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionFalse, "PyTorchJobSucceeded", "")
		jobCond(s, kubeflowv1.JobSucceeded, corev1.ConditionTrue, "PyTorchJobSucceeded", "done")
	})
	return waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionSucceeded) == metav1.ConditionTrue
	})
}

func TestTTLDeletesFinishedJobAndCascades(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	clk := &testClock{}
	startOperator(t, func(r *Reconciler) { r.Clock = clk })

	tj := newTrainingJob(ns, "ttl", 1)
	tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](60)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	succeed(t, c, tj)
	// The TTL passes without the test racing a real one-second TTL.
	clk.advance(2 * time.Minute)
	poke(t, c, tj)
	testenv.WaitGone(t, c, tj)
	// kube-controller-manager's garbage collector deletes the owned job.
	testenv.WaitGone(t, c, &kubeflowv1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ttl-r1"}})
}

func TestTTLCountsFromTheRecordedConditionAfterARestart(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := newTrainingJob(ns, "ttl-restart", 1)
	tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](3600)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	done := succeed(t, c, tj)
	finishedAt := conditions.Get(done, commonv1alpha1.ConditionSucceeded).LastTransitionTime.Time

	// The first operator must keep it: the hour has not passed.
	res, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 59*time.Minute || res.RequeueAfter > time.Hour {
		t.Errorf("requeue after %v, want just under an hour", res.RequeueAfter)
	}
	op.stop(t)

	// A new operator process, an hour and a second after the job finished,
	// knows nothing but what status recorded.
	startOperator(t, func(r *Reconciler) {
		r.Clock = clocktesting.NewFakePassiveClock(finishedAt.Add(time.Hour + time.Second))
	})
	testenv.WaitGone(t, c, tj)
	// The event is emitted after the delete, asynchronously.
	testenv.WaitForEvent(t, c, done, "Expired")
}

func TestDeletionCascadesToTheKubeflowJob(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := newTrainingJob(ns, "cascade", 2)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "cascade-r1")
	if err := c.Delete(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, tj)
	testenv.WaitGone(t, c, job)
}

// TestJAXOnTheDefaultKubeflowBackendStalls: the CRD cannot refuse jax
// when the backend comes from the operator's default (kubeflow here), so
// the kubeflow backend refuses it with the same advice; the job is then
// deleted like any other.
func TestJAXOnTheDefaultKubeflowBackendStalls(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := newTrainingJob(ns, "jax", 2)
	tj.Spec.Framework = trainingv1alpha1.FrameworkJAX
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{commonv1alpha1.ConditionStalled: metav1.ConditionTrue})
	})
	if c := conditions.Get(got, commonv1alpha1.ConditionStalled); c.Reason != commonv1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "use backend: native") {
		t.Errorf("Stalled condition %+v, want InvalidSpec saying to use backend: native", c)
	}
	if got.Status.Backend != trainingv1alpha1.BackendKubeflow {
		t.Errorf("status.backend = %q, want the default kubeflow", got.Status.Backend)
	}
	// The kubeflow backend has no kind for it, so deleting it must not
	// need one.
	if err := c.Delete(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, tj)
}

func TestUnknownAcceleratorTypeStalls(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := newTrainingJob(ns, "h100", 1)
	tj.Spec.Resources = &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 1, Type: "h100"}}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			commonv1alpha1.ConditionStalled:     metav1.ConditionTrue,
			commonv1alpha1.ConditionReconciling: "",
			trainingv1alpha1.ConditionCreated:   metav1.ConditionFalse,
		})
	})
	if c := conditions.Get(got, commonv1alpha1.ConditionStalled); c.Reason != commonv1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, `"h100" is not offered`) {
		t.Errorf("Stalled condition %+v", c)
	}
	testenv.WaitForEvent(t, c, tj, commonv1alpha1.ReasonInvalidSpec)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "h100-r1"}, &kubeflowv1.PyTorchJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("no PyTorchJob may be created for an invalid spec, got %v", err)
	}
}

func TestExistingJobIsAdoptedOrRefused(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)

	// A job of ours that lost the label the cache selects on: the create
	// fails with AlreadyExists, and the operator adopts it.
	ours := newTrainingJob(ns, "adopt", 1)
	if err := c.Create(t.Context(), ours); err != nil {
		t.Fatal(err)
	}
	pre := &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adopt-r1",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ours, trainingv1alpha1.GroupVersion.WithKind("TrainingJob"))}},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			kubeflowv1.PyTorchJobReplicaTypeMaster: {Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "x"}}}}},
		}},
	}
	if err := c.Create(t.Context(), pre); err != nil {
		t.Fatal(err)
	}
	// A job somebody else owns under the name ours would take.
	theirs := newTrainingJob(ns, "taken", 1)
	if err := c.Create(t.Context(), theirs); err != nil {
		t.Fatal(err)
	}
	squatter := pre.DeepCopy()
	squatter.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "taken-r1"}
	if err := c.Create(t.Context(), squatter); err != nil {
		t.Fatal(err)
	}

	startOperator(t, nil)
	waitTJ(t, c, ours, "Created by adoption", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionCreated) == metav1.ConditionTrue
	})
	testenv.Eventually(t, "adopted job relabelled", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pre), pre); err != nil {
			return false, err
		}
		return pre.Labels[trainingv1alpha1.LabelJobName] == "adopt", nil
	})
	got := waitTJ(t, c, theirs, "Stalled on a name conflict", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	if r := conditions.Get(got, commonv1alpha1.ConditionStalled).Reason; r != commonv1alpha1.ReasonNameTaken {
		t.Errorf("Stalled reason %s, want %s", r, commonv1alpha1.ReasonNameTaken)
	}
}

// missReader counts the live reads of Jobs that found none.
type missReader struct {
	client.Reader
	misses *atomic.Int32
}

func (r missReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*batchv1.Job); ok && apierrors.IsNotFound(err) {
		r.misses.Add(1)
	}
	return err
}

// TestNewTrainingJobCreatesItsChildWithoutALiveRead: the first reconcile of
// a new TrainingJob creates its Job without first asking the API server
// whether one exists (TestExistingJobIsAdoptedOrRefused shows that a Job
// that does is still adopted or refused).
func TestNewTrainingJobCreatesItsChildWithoutALiveRead(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	var misses atomic.Int32
	startOperator(t, func(r *Reconciler) { r.APIReader = missReader{Reader: r.APIReader, misses: &misses} })

	tj := native(newTrainingJob(ns, "fresh", 1))
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	waitTJ(t, c, tj, "Created", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionCreated) == metav1.ConditionTrue
	})
	if n := misses.Load(); n != 0 {
		t.Errorf("the operator read the new job's child live %d times before creating it", n)
	}
}

func TestSettledJobsCostNoWrites(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	running := newTrainingJob(ns, "settled-running", 2)
	done := newTrainingJob(ns, "settled-done", 1)
	done.Spec.RunPolicy.CleanPodPolicy = trainingv1alpha1.CleanPodPolicyAll
	for _, tj := range []*trainingv1alpha1.TrainingJob{running, done} {
		if err := c.Create(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
	}
	job := waitPyTorchJob(t, c, ns, "settled-running-r1")
	// A finished pod that the clean-pod policy of the running job leaves.
	tmpl := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settled-running-r1-master-0", Labels: tmpl.Labels}, Spec: tmpl.Spec}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "running")
	})
	waitTJ(t, c, running, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionRunning) == metav1.ConditionTrue
	})
	succeed(t, c, done)
	testenv.WaitForEvent(t, c, done, "Succeeded")
	// Let the reconciles triggered by our own writes run out.
	settle(t, c, op, ns, running, done)

	op.nsWrites.reset()
	for range 20 {
		for _, tj := range []*trainingv1alpha1.TrainingJob{running, done} {
			if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if w := op.nsWrites.in(ns); len(w) != 0 {
		t.Fatalf("40 reconciles of settled TrainingJobs wrote %d times: %v", len(w), w)
	}

	// A restarted operator reconciles everything from a cold cache.
	op.stop(t)
	op2 := startOperator(t, nil)
	for range 5 {
		for _, tj := range []*trainingv1alpha1.TrainingJob{running, done} {
			if _, err := op2.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Only this test's namespace counts: the restarted operator also
	// finishes work in namespaces of earlier tests that are being deleted.
	consistentlyNoWrites(t, op2, ns, "a restarted operator leaves settled TrainingJobs alone")
}

// featureStoreCRD is a stand-in for the FeatureStore operator's CRD, with
// only what the contract in apis/common promises: status.clientConfig and
// Ready.
func featureStoreCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "featurestores.features.mlplatform.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: featureref.GVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "featurestores", Singular: "featurestore", Kind: "FeatureStore", ListKind: "FeatureStoreList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: featureref.GVK.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

func TestWaitsForFeatureStoreWithOrWithoutItsCRD(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	removeFeatureStoreCRD(t, c)
	op := startOperator(t, nil)
	if op.reconciler.WatchesFeatureStores {
		t.Fatal("the FeatureStore CRD is not installed yet, so it cannot be watched")
	}

	tj := newTrainingJob(ns, "features", 1)
	tj.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "customers"}}}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "waiting for the FeatureStore", func(tj *trainingv1alpha1.TrainingJob) bool {
		return hasConds(tj, map[string]metav1.ConditionStatus{
			trainingv1alpha1.ConditionFeatureStoresReady: metav1.ConditionFalse,
			commonv1alpha1.ConditionReconciling:          metav1.ConditionTrue,
			trainingv1alpha1.ConditionCreated:            metav1.ConditionFalse,
		})
	})
	if c := conditions.Get(got, trainingv1alpha1.ConditionFeatureStoresReady); c.Reason != commonv1alpha1.ReasonDependencyNotFound || !strings.Contains(c.Message, "customers") {
		t.Errorf("FeatureStoresReady %+v", c)
	}
	testenv.WaitForEvent(t, c, tj, "WaitingForFeatureStores")
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "features-r1"}, &kubeflowv1.PyTorchJob{}); !apierrors.IsNotFound(err) {
		t.Fatalf("no PyTorchJob may exist while its FeatureStore is missing, got %v", err)
	}

	// The FeatureStore operator gets installed; a restarted operator
	// watches FeatureStores and starts the job once the store is Ready.
	crd := featureStoreCRD()
	if err := c.Create(t.Context(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	store := &unstructured.Unstructured{}
	store.SetGroupVersionKind(featureref.GVK)
	store.SetNamespace(ns)
	store.SetName("customers")
	testenv.Eventually(t, "create a FeatureStore", func(ctx context.Context) (bool, error) {
		return c.Create(ctx, store) == nil, nil
	})
	op.stop(t)
	op2 := startOperator(t, nil)
	if !op2.reconciler.WatchesFeatureStores {
		t.Fatal("the restarted operator must watch FeatureStores")
	}
	waitTJ(t, c, tj, "FeatureStore found but not Ready", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionFeatureStoresReady)
		return c != nil && c.Reason == commonv1alpha1.ReasonDependencyNotReady
	})

	markStoreReady(t, c, store)
	job := waitPyTorchJob(t, c, ns, "features-r1")
	spec := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Spec
	if !hasSecretVolume(spec.Volumes, "customers-feast") {
		t.Errorf("the store's client configuration is not mounted: %+v", spec.Volumes)
	}
	waitTJ(t, c, tj, "FeatureStoresReady", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionFeatureStoresReady) == metav1.ConditionTrue &&
			condStatus(tj, trainingv1alpha1.ConditionCreated) == metav1.ConditionTrue
	})
}

// removeFeatureStoreCRD deletes the stand-in FeatureStore CRD that another
// test of this binary may have installed, and waits until the API no longer
// serves the kind, so a test can start from a cluster without it whatever
// ran before.
func removeFeatureStoreCRD(t *testing.T, c client.Client) {
	t.Helper()
	if err := c.Delete(t.Context(), featureStoreCRD()); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(operatorConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the FeatureStore CRD is gone", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(featureStoreCRD()), &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		_, err := dc.ServerResourcesForGroupVersion(featureref.GVK.GroupVersion().String())
		return apierrors.IsNotFound(err), nil
	})
}

// markStoreReady plays the FeatureStore operator: the stand-in store gets
// a Ready condition and its client configuration's Secret name.
func markStoreReady(t *testing.T, c client.Client, store *unstructured.Unstructured) {
	t.Helper()
	_ = unstructured.SetNestedMap(store.Object, map[string]any{
		"clientConfig": map[string]any{"secretName": "customers-feast", "key": "feature_store.yaml"},
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Reconciled", "message": "ok",
			"observedGeneration": store.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		}},
	}, "status")
	if err := c.Status().Update(t.Context(), store); err != nil {
		t.Fatal(err)
	}
}

func hasSecretVolume(volumes []corev1.Volume, secret string) bool {
	for _, v := range volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			return true
		}
	}
	return false
}

// TestJobInTheClustersOwnNamespaceStalls: a TrainingJob in a kube-*
// namespace, where the chart's owned-objects policy refuses the operator
// every write, stalls at once with NamespaceReserved, and the operator
// tries no child there. Before, its status said "Creating Job" for ever
// and only ReconcileError events told the refusal.
func TestJobInTheClustersOwnNamespaceStalls(t *testing.T) {
	c := adminClient(t)
	op := startOperator(t, nil)
	tj := native(newTrainingJob(metav1.NamespacePublic, "", 2))
	tj.Name, tj.GenerateName = "", "reserved-"
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), tj) })
	got := waitTJ(t, c, tj, "Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	stalled := conditionOf(got, commonv1alpha1.ConditionStalled)
	if stalled.Reason != commonv1alpha1.ReasonNamespaceReserved || !strings.Contains(stalled.Message, "create the TrainingJob in another namespace") {
		t.Errorf("Stalled %s: %q, want %s naming the remedy", stalled.Reason, stalled.Message, commonv1alpha1.ReasonNamespaceReserved)
	}
	testenv.WaitForEvent(t, c, tj, commonv1alpha1.ReasonNamespaceReserved)
	for _, w := range op.nsWrites.in(metav1.NamespacePublic) {
		if w.Resource != "trainingjobs/status" && w.Resource != "events" {
			t.Errorf("the operator tried %s %s %s in %s", w.Verb, w.Resource, w.Name, metav1.NamespacePublic)
		}
	}
}
