package backend

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

func TestQueueMarkSaysTheLabelCameFromTheSpec(t *testing.T) {
	queued := &trainingv1alpha1.TrainingJob{Spec: trainingv1alpha1.TrainingJobSpec{QueueName: "default"}}
	unqueued := &trainingv1alpha1.TrainingJob{}
	for name, tc := range map[string]struct {
		tj          *trainingv1alpha1.TrainingJob
		annotations map[string]string
		want        map[string]string
	}{
		"queued: marked":                 {tj: queued, annotations: map[string]string{"a": "b"}, want: map[string]string{"a": "b", AnnotationQueueFromSpec: "default"}},
		"queued from nothing":            {tj: queued, want: map[string]string{AnnotationQueueFromSpec: "default"}},
		"unqueued: the mark goes":        {tj: unqueued, annotations: map[string]string{"a": "b", AnnotationQueueFromSpec: "team-a"}, want: map[string]string{"a": "b"}},
		"unqueued without annotations":   {tj: unqueued},
		"unqueued keeps the others only": {tj: unqueued, annotations: map[string]string{"a": "b"}, want: map[string]string{"a": "b"}},
	} {
		t.Run(name, func(t *testing.T) {
			in := maps.Clone(tc.annotations)
			got := WithQueueMark(in, tc.tj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WithQueueMark (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.annotations, in); diff != "" {
				t.Errorf("WithQueueMark changed its input (-want +got):\n%s", diff)
			}
		})
	}

	for name, tc := range map[string]struct {
		labels, annotations map[string]string
		want                bool
	}{
		"marked by the operator": {labels: map[string]string{trainingv1alpha1.LabelKueueQueueName: "default"}, annotations: map[string]string{AnnotationQueueFromSpec: "default"}, want: true},
		// Kueue's default-LocalQueue webhook, or an operator older than the mark.
		"unmarked":                 {labels: map[string]string{trainingv1alpha1.LabelKueueQueueName: "default"}},
		"marked for another queue": {labels: map[string]string{trainingv1alpha1.LabelKueueQueueName: "default"}, annotations: map[string]string{AnnotationQueueFromSpec: "team-a"}},
		"no label":                 {annotations: map[string]string{AnnotationQueueFromSpec: "default"}},
	} {
		t.Run(name, func(t *testing.T) {
			child := &metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}
			if got := QueueFromSpec(child); got != tc.want {
				t.Errorf("QueueFromSpec = %t, want %t", got, tc.want)
			}
		})
	}
}
