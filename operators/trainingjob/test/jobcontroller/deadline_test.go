package jobcontroller

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestTheLargestActiveDeadlineDoesNotFailTheRun gives the real Job
// controller the largest deadline admission accepts: it multiplies it by
// time.Second, and a value that overflowed would fail the Job at once with
// DeadlineExceeded.
func TestTheLargestActiveDeadlineDoesNotFailTheRun(t *testing.T) {
	c, ns := setup(t)
	tj := newTJ(ns, "deadline", 1)
	tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](trainingv1alpha1.MaxActiveDeadlineSeconds)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	// The Job controller checks the deadline in the sync that records the
	// start time, and fails an overflowed one right there, before any pod.
	job := &batchv1.Job{}
	testenv.Eventually(t, "the Job controller starts the Job", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "deadline-r1"}, job)
		return err == nil && job.Status.StartTime != nil, client.IgnoreNotFound(err)
	})
	pods := waitPodsOrFailure(t, c, job)
	kubelet(t, c, &pods[0], corev1.PodRunning, 0, false)
	got := waitTJ(t, c, tj, "Running or Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning) || conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	if conditions.IsTrue(got, commonv1alpha1.ConditionFailed) {
		t.Fatalf("the largest accepted deadline failed the run: %+v", got.Status.Conditions)
	}
}

// waitPodsOrFailure waits for the Job's one pod, and fails the test at once
// if the Job controller fails the Job instead.
func waitPodsOrFailure(t *testing.T, c client.Client, job *batchv1.Job) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testenv.Eventually(t, "the pod of "+job.Name+", or the Job failed", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		for _, cond := range job.Status.Conditions {
			if (cond.Type == batchv1.JobFailed || cond.Type == batchv1.JobFailureTarget) && cond.Status == corev1.ConditionTrue {
				t.Fatalf("the Job controller failed the Job: %s %s", cond.Reason, cond.Message)
			}
		}
		list := &corev1.PodList{}
		if err := c.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) == 1, nil
	})
	return pods
}
