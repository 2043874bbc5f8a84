package kubeflowcompat

import (
	"context"
	"fmt"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// startStack runs the real Kubeflow training-operator and our operator
// (Kubeflow as its default backend) and returns an admin client and a new
// namespace for the test's objects, and the training-operator.
func startStack(t *testing.T) (client.Client, string, *harness.Kubeflow) {
	t.Helper()
	binary, err := harness.KubeflowBinary(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	scheme := harness.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := env.AddUser("kubeflow-training-operator", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	kf, err := harness.StartKubeflow(t.Context(), admin, c, binary, t.TempDir(), chartInitContainerArgs(t)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kf.Stop() })
	op, err := harness.StartOperator(env.Config, scheme, harness.Options{DefaultBackend: trainingv1alpha1.BackendKubeflow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeflow-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return c, ns.Name, kf
}

// checkpointedJob is a two-pod PyTorch TrainingJob with a checkpoint that
// allows restarts without backoff: whether a failure starts a next run is
// then up to the failure's class alone.
func checkpointedJob(ns, name string) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch,
			Image:     "registry.example.com/mnist:1",
			Command:   []string{"python", "train.py"},
			Workers:   2,
			RunPolicy: trainingv1alpha1.RunPolicy{BackoffLimit: ptr.To[int32](3)},
			Checkpoint: &trainingv1alpha1.Checkpoint{
				Size:                  ptr.To(resource.MustParse("1Gi")),
				MaxRestarts:           ptr.To[int32](3),
				RestartBackoffSeconds: ptr.To[int32](0),
			},
		},
	}
}

// masterPod waits for the pod Kubeflow creates for the Master of job.
func masterPod(t *testing.T, c client.Client, ns, job string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	poll(t, "Kubeflow creates the Master pod of "+job, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: job + "-master-0"}, pod)
		return err == nil, client.IgnoreNotFound(err)
	})
	return pod
}

// terminate acts out the kubelet when the pod's container ends with
// exitCode, as its restart policy says: with Never the pod fails; with
// OnFailure or Always the container restarts in place and the pod keeps
// running. cond, when set, is a condition the control plane added first
// (DisruptionTarget).
func terminate(t *testing.T, c client.Client, pod *corev1.Pod, exitCode int32, message string, cond *corev1.PodCondition) {
	t.Helper()
	poll(t, "the kubelet reports "+pod.Name+" ended", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		now := metav1.Now()
		ended := corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: "Error", Message: message, StartedAt: now, FinishedAt: now}
		cs := corev1.ContainerStatus{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image}
		if cond != nil {
			pod.Status.Conditions = append(pod.Status.Conditions, *cond)
		}
		if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			pod.Status.Phase = corev1.PodFailed
			cs.State.Terminated = &ended
		} else {
			pod.Status.Phase = corev1.PodRunning
			cs.RestartCount = 1
			cs.LastTerminationState.Terminated = &ended
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		err := c.Status().Update(ctx, pod)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func TestKubeflowUserErrorFailsWithoutRetry(t *testing.T) {
	c, ns, _ := startStack(t)
	tj := checkpointedJob(ns, "crash")
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	pod := masterPod(t, c, ns, "crash-r1")
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("Kubeflow's Master pod has restartPolicy %s, want Never: a failure must end the run", pod.Spec.RestartPolicy)
	}
	terminate(t, c, pod, 1, "ValueError: bad learning rate", nil)

	var got *trainingv1alpha1.TrainingJob
	poll(t, "the TrainingJob fails on the user error", func(ctx context.Context) (bool, error) {
		got = &trainingv1alpha1.TrainingJob{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, err
		}
		return conditions.IsTrue(got, commonv1alpha1.ConditionFailed), nil
	})
	if f := got.Status.Failure; f == nil || f.Class != trainingv1alpha1.FailureClassUser || f.ExitCode != 1 {
		t.Errorf("failure %+v, want a user error with exit code 1", got.Status.Failure)
	}
	if got.Status.Run != 1 || got.Status.RestartCount != 0 {
		t.Errorf("run %d restarts %d, want 1 0: a user error is not retried", got.Status.Run, got.Status.RestartCount)
	}
	testenv.Consistently(t, "no second run", 3*time.Second, func(ctx context.Context) error {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crash-r2"}, &kubeflowv1.PyTorchJob{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("run 2 exists (%w)", err)
		}
		return nil
	})
}

func TestKubeflowInfrastructureFailureStartsTheNextRun(t *testing.T) {
	c, ns, _ := startStack(t)
	tj := checkpointedJob(ns, "preempted")
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	pod := masterPod(t, c, ns, "preempted-r1")
	terminate(t, c, pod, 143, "", &corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler,
		Message: "acted out", LastTransitionTime: metav1.Now(),
	})

	next := masterPod(t, c, ns, "preempted-r2")
	env := map[string]string{}
	for _, e := range next.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env[trainingv1alpha1.EnvRun] != "2" || env[trainingv1alpha1.EnvResume] != "true" {
		t.Errorf("run 2's checkpoint contract %v, want run 2 resuming", env)
	}
	got := &trainingv1alpha1.TrainingJob{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(tj), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.RestartCount != 1 || len(got.Status.Runs) != 1 || got.Status.Runs[0].Class != trainingv1alpha1.FailureClassInfrastructure {
		t.Errorf("restarts %d runs %+v, want one infrastructure failure", got.Status.RestartCount, got.Status.Runs)
	}
	// Run 1's Master stays as the kubelet left it: Kubeflow did not
	// replace it in place.
	old := &corev1.Pod{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), old); err != nil || old.UID != pod.UID {
		t.Errorf("run 1's Master was replaced or removed (%v)", err)
	}
}
