package backend

import (
	"testing"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

func TestSuspendAndQueueLabelHaveOneRule(t *testing.T) {
	for _, tc := range []struct {
		name        string
		suspend     bool
		queue       string
		wantSuspend bool
	}{
		{name: "running", wantSuspend: false},
		{name: "suspended by the user", suspend: true, wantSuspend: true},
		{name: "queued: Kueue admits it", queue: "team-a", wantSuspend: true},
		{name: "queued and suspended", suspend: true, queue: "team-a", wantSuspend: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := &trainingv1alpha1.TrainingJob{Spec: trainingv1alpha1.TrainingJobSpec{Suspend: tc.suspend, QueueName: tc.queue}}
			if got := Suspend(tj); got != tc.wantSuspend {
				t.Errorf("Suspend = %t, want %t", got, tc.wantSuspend)
			}
			in := map[string]string{"app": "x", trainingv1alpha1.LabelKueueQueueName: "old"}
			got := WithQueueLabel(in, tj)
			if q, ok := got[trainingv1alpha1.LabelKueueQueueName]; tc.queue == "" && ok || tc.queue != "" && q != tc.queue {
				t.Errorf("queue label %q (present %t), want %q", q, ok, tc.queue)
			}
			if got["app"] != "x" || in[trainingv1alpha1.LabelKueueQueueName] != "old" {
				t.Errorf("WithQueueLabel must keep the other labels and leave its input alone: %v, %v", got, in)
			}
		})
	}
	if got := WithQueueLabel(nil, &trainingv1alpha1.TrainingJob{Spec: trainingv1alpha1.TrainingJobSpec{QueueName: "q"}}); got[trainingv1alpha1.LabelKueueQueueName] != "q" {
		t.Errorf("WithQueueLabel(nil) = %v", got)
	}
}

func TestWithQueueLabelCarriesTheKueuePriorityClass(t *testing.T) {
	tj := &trainingv1alpha1.TrainingJob{Spec: trainingv1alpha1.TrainingJobSpec{QueueName: "q"}}
	tj.Labels = map[string]string{trainingv1alpha1.LabelKueuePriorityClass: "high", "team": "vision"}
	got := WithQueueLabel(map[string]string{"app": "x"}, tj)
	if got[trainingv1alpha1.LabelKueuePriorityClass] != "high" {
		t.Errorf("priority class label %q, want high: %v", got[trainingv1alpha1.LabelKueuePriorityClass], got)
	}
	if _, ok := got["team"]; ok {
		t.Errorf("only Kueue's priority label is copied from the TrainingJob: %v", got)
	}
}
