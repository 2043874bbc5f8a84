package training

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// mpiJob is an mpi4py allreduce (images/mpi) over workers pods with slots
// ranks each, launched by mpirun over the operator's SSH.
func mpiJob(t *testing.T, ns, name string, workers, slots int32) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkMPI,
			Image:     steps.Image(t, "mpi"),
			Command:   []string{"mpirun", "python3", "/opt/ml-platform/allreduce.py"},
			Workers:   workers,
			MPI:       &trainingv1alpha1.MPISpec{SlotsPerWorker: ptr.To(slots)},
			Resources: &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			}},
			// Finished pods stay for their logs.
			RunPolicy: trainingv1alpha1.RunPolicy{CleanPodPolicy: trainingv1alpha1.CleanPodPolicyNone},
		},
	}
}

var allreduceLine = regexp.MustCompile(`allreduce size=(\d+) sum=(\d+) expected=(\d+) hosts=(\d+)`)

// allowBaseline relaxes ns to the baseline Pod Security Standard: on the
// kubeflow backend, training-operator v1's MPIJob launcher carries an init
// container (kubectl-delivery) without a securityContext, which restricted
// refuses (TestMPIKubeflowLauncherIsRefusedUnderRestricted).
func allowBaseline(t *testing.T, e *steps.Env, ns string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline"}}}`)
	if err := e.C.Patch(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// TestMPIAllreduceSucceeds: two pods with two slots each run a real mpi4py
// allreduce, started by mpirun on the launcher over the operator's SSH
// transport; rank 0 reports the reduced sum of rank+1 over the four ranks
// (10), which the test checks against the world size, and that ranks ran
// on both pods; status.progress shows the same numbers, reported by world
// rank 0 through the progress helper.
func TestMPIAllreduceSucceeds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		if backend == string(trainingv1alpha1.BackendKubeflow) {
			allowBaseline(t, e, ns)
		}
		tj := mpiJob(t, ns, "allreduce", 2, 2)
		create(t, e, tj, backend)
		e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
		if tj.Status.Run != 1 || tj.Status.RestartCount != 0 {
			t.Errorf("run %d, restarts %d; want one run", tj.Status.Run, tj.Status.RestartCount)
		}
		logs, err := e.RunLogs(t.Context(), tj, 1)
		if err != nil {
			t.Fatal(err)
		}
		var found [][]string
		for _, l := range logs {
			found = append(found, allreduceLine.FindAllStringSubmatch(l, -1)...)
		}
		if len(found) != 1 {
			t.Fatalf("%d allreduce results in the run's logs, want rank 0's one: %v", len(found), logs)
		}
		n := func(i int) int { v, _ := strconv.Atoi(found[0][i]); return v }
		size, sum, hosts := n(1), n(2), n(4)
		if size != 4 || sum != size*(size+1)/2 || hosts != 2 {
			t.Errorf("allreduce over %d ranks on %d hosts summed %d; want 4 ranks on 2 hosts summing 10", size, hosts, sum)
		}
		// World rank 0, on the launcher, reported the same result as the
		// training's progress: the operator accepted it from that pod.
		waitProgress(t, e, tj, 1, 1, map[string]string{"sum": "10", "ranks": "4", "hosts": "2"})
	})
}

// TestMPIKubeflowLauncherIsRefusedUnderRestricted shows where the
// restricted Pod Security Standard cannot hold for MPI: on the kubeflow
// backend, in a restricted namespace, the API server refuses the launcher
// for training-operator v1's kubectl-delivery init container, which the
// training-operator reports as an MPIJobFailed event on its MPIJob.
func TestMPIKubeflowLauncherIsRefusedUnderRestricted(t *testing.T) {
	if !slices.Contains(backends(), string(trainingv1alpha1.BackendKubeflow)) {
		t.Skip("the kubeflow backend is not under test")
	}
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-training")
	tj := mpiJob(t, ns, "refused", 2, 1)
	create(t, e, tj, string(trainingv1alpha1.BackendKubeflow))
	var seen []string
	err := wait.PollUntilContextTimeout(t.Context(), steps.Poll, trainTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		seen, err = e.Events(ctx, ns, "refused-r1", "MPIJobFailed")
		for _, m := range seen {
			if strings.Contains(m, `violates PodSecurity "restricted:latest"`) && strings.Contains(m, `"kubectl-delivery"`) {
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("no refusal of the launcher's kubectl-delivery container among the MPIJob's MPIJobFailed events %q: %v", seen, err)
	}
}

// launcherGivesUp is an MPI program whose every rank prints a marker and
// exits 3, so that mpirun, on the launcher, fails the run.
var launcherGivesUp = []string{"mpirun", "python3", "-c",
	"import sys\nfrom mpi4py import MPI\nprint('rank %d gives up' % MPI.COMM_WORLD.Get_rank(), flush=True)\nsys.exit(3)"}

// isLauncher says whether pod is the MPI launcher of its run: completion
// index 0 on the native backend, the Launcher replica on the kubeflow one.
func isLauncher(pod *corev1.Pod) bool {
	if idx, ok := pod.Annotations["batch.kubernetes.io/job-completion-index"]; ok {
		return idx == "0"
	}
	return pod.Labels["training.kubeflow.org/replica-type"] == "launcher"
}

// TestMPILauncherFailureFailsTheJobWithItsReason: when mpirun fails on the
// launcher (every rank exits 3), the job fails at once (one run, no
// restart: a program that exits non-zero is the user's) and its failure
// names the launcher's container, mpirun's exit code and the end of the
// launcher's log, not a worker whose SSH server was stopped as a
// consequence.
func TestMPILauncherFailureFailsTheJobWithItsReason(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		if backend == string(trainingv1alpha1.BackendKubeflow) {
			allowBaseline(t, e, ns)
		}
		tj := mpiJob(t, ns, "gives-up", 2, 1)
		tj.Spec.Command = launcherGivesUp
		create(t, e, tj, backend)
		e.WaitCondition(t, tj, "Failed", metav1.ConditionTrue, "Succeeded", trainTimeout)
		f := tj.Status.Failure
		if f == nil {
			t.Fatalf("Failed without status.failure: %+v", tj.Status)
		}
		var pod corev1.Pod
		if err := e.C.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: f.Pod}, &pod); err != nil {
			t.Fatalf("status.failure names pod %q: %v", f.Pod, err)
		}
		if !isLauncher(&pod) || f.ExitCode != 3 || f.Class != trainingv1alpha1.FailureClassUser {
			t.Errorf("status.failure %+v: want the launcher's container, exit code 3, a user failure", f)
		}
		if !strings.Contains(f.TerminationMessage, "gives up") {
			t.Errorf("status.failure's termination message %q lacks the launcher's log", f.TerminationMessage)
		}
		if tj.Status.RestartCount != 0 {
			t.Errorf("%d restarts of a failing program, want none", tj.Status.RestartCount)
		}
	})
}

// TestMPIWorkerThatNeverStartsIsVisibleAndFailsTheLauncher: a namespace
// whose quota admits one pod gets the launcher (the Job controller creates
// completion index 0 first) and refuses the worker. While the launcher
// waits for the worker's SSH server, the TrainingJob says why on its
// Running condition (PodsRefused, with the quota's words); when the
// launcher's bounded wait (MLPLATFORM_MPI_WAIT_SECONDS) ends, the job
// fails with the launcher's reason instead of hanging. Native backend
// only: training-operator v1 creates an MPIJob's launcher after its
// workers, so there the quota refuses the launcher, a refusal
// TestMPIKubeflowLauncherIsRefusedUnderRestricted covers.
func TestMPIWorkerThatNeverStartsIsVisibleAndFailsTheLauncher(t *testing.T) {
	if !slices.Contains(backends(), string(trainingv1alpha1.BackendNative)) {
		t.Skip("the native backend is not under test")
	}
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-training")
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-pod"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}
	if err := e.C.Create(t.Context(), quota); err != nil {
		t.Fatal(err)
	}
	tj := mpiJob(t, ns, "lonely", 2, 1)
	tj.Spec.Env = append(tj.Spec.Env, corev1.EnvVar{Name: "MLPLATFORM_MPI_WAIT_SECONDS", Value: "90"})
	create(t, e, tj, string(trainingv1alpha1.BackendNative))
	var running *metav1.Condition
	steps.Until(t, "the worker's refusal on the Running condition", trainTimeout, func(ctx context.Context) (bool, error) {
		if err := e.C.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
			return false, err
		}
		running = meta.FindStatusCondition(tj.Status.Conditions, "Running")
		return running != nil && running.Reason == commonv1alpha1.ReasonPodsRefused, nil
	})
	if !strings.Contains(running.Message, "exceeded quota") {
		t.Errorf("Running=%s %s: %q does not say the quota refused the worker", running.Status, running.Reason, running.Message)
	}
	e.WaitCondition(t, tj, "Failed", metav1.ConditionTrue, "Succeeded", trainTimeout)
	f := tj.Status.Failure
	if f == nil || !strings.Contains(f.TerminationMessage, "did not answer in time") {
		t.Fatalf("status.failure %+v: want the launcher's words on the worker that never answered", f)
	}
	var pod corev1.Pod
	if err := e.C.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: f.Pod}, &pod); err != nil || !isLauncher(&pod) {
		t.Errorf("status.failure names pod %q (%v), not the launcher", f.Pod, err)
	}
}
