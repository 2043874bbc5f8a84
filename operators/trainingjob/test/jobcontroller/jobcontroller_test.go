package jobcontroller

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
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

var env *testenv.Env

func TestMain(m *testing.M) {
	crds := filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator", "files", "crds")
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{crds},
		ControllerManager: true,
		Controllers:       []string{"job-controller"},
	}, &env)
}

// setup starts the operator (native by default) and returns a client and a
// fresh namespace.
func setup(t *testing.T) (client.Client, string) {
	t.Helper()
	scheme := harness.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	op, err := harness.StartOperator(env.Config, scheme, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	return c, testenv.CreateNamespace(t, c, "jobctl")
}

func newTJ(ns, name string, workers int32) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch,
			Image:     "registry.example.com/mnist:1",
			Workers:   workers,
		},
	}
}

// waitPods waits for the Job controller to create n active pods of a run.
func waitPods(t *testing.T, c client.Client, ns, job string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testenv.Eventually(t, fmt.Sprintf("the Job controller creates %d pods of %s", n, job), func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job}); err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				pods = append(pods, p)
			}
		}
		return len(pods) == n, nil
	})
	slices.SortFunc(pods, compareIndex)
	return pods
}

func compareIndex(a, b corev1.Pod) int {
	ia, _ := strconv.Atoi(a.Annotations[batchv1.JobCompletionIndexAnnotation])
	ib, _ := strconv.Atoi(b.Annotations[batchv1.JobCompletionIndexAnnotation])
	return ia - ib
}

// kubelet acts out the kubelet: it moves a pod to a phase.
func kubelet(t *testing.T, c client.Client, pod *corev1.Pod, phase corev1.PodPhase, exitCode int32, disruption bool) {
	t.Helper()
	testenv.Eventually(t, "pod "+pod.Name+" "+string(phase), func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		name := pod.Spec.Containers[0].Name
		now := metav1.Now()
		pod.Status.Phase = phase
		switch phase {
		case corev1.PodRunning:
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, Image: "x", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		default:
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}
			if disruption {
				pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler, LastTransitionTime: now})
			}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, Image: "x", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: "Completed", FinishedAt: now}}}}
		}
		err := c.Status().Update(ctx, pod)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func waitTJ(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob, what string, check func(*trainingv1alpha1.TrainingJob) bool) *trainingv1alpha1.TrainingJob {
	t.Helper()
	got := &trainingv1alpha1.TrainingJob{}
	testenv.Eventually(t, what, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, err
		}
		return check(got), nil
	})
	return got
}

func TestTheJobControllerRunsEveryRankToSuccess(t *testing.T) {
	c, ns := setup(t)
	tj := newTJ(ns, "ddp", 3)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	pods := waitPods(t, c, ns, "ddp-r1", 3)
	for i, p := range pods {
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] != strconv.Itoa(i) || p.Spec.Hostname != fmt.Sprintf("ddp-r1-%d", i) || p.Spec.Subdomain != "trainingjob-ranks" {
			t.Errorf("pod %s: index %q hostname %q subdomain %q, want rank %d at ddp-r1-%d.trainingjob-ranks", p.Name, p.Annotations[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname, p.Spec.Subdomain, i, i)
		}
		// The Job controller keeps the operator's own definition of the
		// completion index, which RANK expands from.
		n := 0
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "JOB_COMPLETION_INDEX" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("pod %s defines JOB_COMPLETION_INDEX %d times", p.Name, n)
		}
		if p.Labels[trainingv1alpha1.LabelJobName] != "ddp" {
			t.Errorf("pod %s labels %v lack the TrainingJob's", p.Name, p.Labels)
		}
	}
	for i := range pods {
		kubelet(t, c, &pods[i], corev1.PodRunning, 0, false)
	}
	waitTJ(t, c, tj, "Running once the Job counts every rank ready", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	for i := range pods {
		kubelet(t, c, &pods[i], corev1.PodSucceeded, 0, false)
	}
	got := waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSucceeded) && conditions.IsTrue(tj, trainingv1alpha1.ConditionFinished)
	})
	// The Job controller decides success (SuccessCriteriaMet) before it
	// marks the Job Complete, once the pods are gone; the TrainingJob ended
	// when the decision was made, whichever write the operator saw first.
	job := &batchv1.Job{}
	testenv.Eventually(t, "the Job Complete", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ddp-r1"}, job); err != nil {
			return false, err
		}
		return job.Status.CompletionTime != nil, nil
	})
	want := *job.Status.CompletionTime
	for _, cond := range job.Status.Conditions {
		if cond.Type == batchv1.JobSuccessCriteriaMet && cond.Status == corev1.ConditionTrue {
			want = cond.LastTransitionTime
		}
	}
	if got.Status.CompletionTime == nil || !got.Status.CompletionTime.Equal(&want) {
		t.Errorf("completionTime %v, want the Job's decision time %v (completionTime %v)", got.Status.CompletionTime, want, job.Status.CompletionTime)
	}
}

func TestAFailedRankEndsTheRunAndADisruptionStartsTheNext(t *testing.T) {
	c, ns := setup(t)
	tj := newTJ(ns, "resume", 2)
	tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{
		Size: ptr.To(resource.MustParse("1Gi")), AccessMode: corev1.ReadWriteMany,
		MaxRestarts: ptr.To[int32](1), RestartBackoffSeconds: ptr.To[int32](0),
	}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	// Run 1: the scheduler preempts rank 1; the Job never retries it
	// (backoffLimit 0), the operator starts run 2.
	pods := waitPods(t, c, ns, "resume-r1", 2)
	for i := range pods {
		kubelet(t, c, &pods[i], corev1.PodRunning, 0, false)
	}
	kubelet(t, c, &pods[1], corev1.PodFailed, 143, true)
	pods2 := waitPods(t, c, ns, "resume-r2", 2)
	got := waitTJ(t, c, tj, "run 2 recorded", func(tj *trainingv1alpha1.TrainingJob) bool { return tj.Status.Run == 2 })
	if got.Status.RestartCount != 1 || len(got.Status.Runs) != 1 || got.Status.Runs[0].Class != trainingv1alpha1.FailureClassInfrastructure {
		t.Errorf("after the disruption: restarts %d runs %+v", got.Status.RestartCount, got.Status.Runs)
	}
	// Run 2: rank 0 exits 1, a user error: no run 3.
	for i := range pods2 {
		kubelet(t, c, &pods2[i], corev1.PodRunning, 0, false)
	}
	kubelet(t, c, &pods2[0], corev1.PodFailed, 1, false)
	got = waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed) && conditions.IsTrue(tj, commonv1alpha1.ConditionStalled)
	})
	if got.Status.Failure == nil || got.Status.Failure.Class != trainingv1alpha1.FailureClassUser || got.Status.Failure.ExitCode != 1 {
		t.Errorf("failure %+v", got.Status.Failure)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "resume-r3"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("run 3 exists (%v) after a user error", err)
	}
}
