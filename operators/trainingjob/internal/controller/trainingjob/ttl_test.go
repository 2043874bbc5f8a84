package trainingjob

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestTTLCountsFromTheChildsCompletionTime acts out the Job controller
// recording that two runs ended two hours ago, as after an operator outage,
// and runs the operator on the real clock: the job whose TTL of one hour
// has passed since that end is deleted at once, the one with three hours
// is kept. Counted from when the operator noticed, neither would be due.
func TestTTLCountsFromTheChildsCompletionTime(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	end := metav1.NewTime(time.Now().Add(-2 * time.Hour).Truncate(time.Second))
	tjs := map[string]*trainingv1alpha1.TrainingJob{}
	for name, ttl := range map[string]int32{"expired": 3600, "kept": 3 * 3600} {
		tj := native(newTrainingJob(ns, name, 1))
		tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To(ttl)
		if err := c.Create(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
		tjs[name] = tj
		job := waitBatchJob(t, c, ns, name+"-r1")
		// The run started an hour before it ended; its pods are gone.
		setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
			s.StartTime = ptr.To(metav1.NewTime(end.Add(-time.Hour)))
		})
		completeJob(t, c, job, nil, end)
	}

	testenv.WaitGone(t, c, tjs["expired"])
	kept := waitTJ(t, c, tjs["kept"], "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSucceeded)
	})
	if kept.Status.CompletionTime == nil || !kept.Status.CompletionTime.Equal(&end) {
		t.Errorf("completionTime %v, want the Job's %v", kept.Status.CompletionTime, end)
	}
	testenv.Consistently(t, "the job with time left is kept", 3*time.Second, func(ctx context.Context) error {
		_, err := getTJ(ctx, c, tjs["kept"])
		if err != nil {
			return fmt.Errorf("the job with an hour left: %w", err)
		}
		return nil
	})
}
