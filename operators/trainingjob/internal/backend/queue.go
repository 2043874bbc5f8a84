package backend

import (
	"maps"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// The suspend flag and the Kueue queue label of a child have one owner
// each: these functions. The backends build a new child with them and the
// reconciler converges an existing one with them, so the two can never
// disagree.

// Suspend is the suspend flag of tj's child: the user's, or true for a
// queued job, which Kueue admits by unsuspending it (the operator never
// unsuspends a queued job itself).
func Suspend(tj *trainingv1alpha1.TrainingJob) bool {
	return tj.Spec.Suspend || tj.Spec.QueueName != ""
}

// WithQueueLabel returns a copy of labels carrying tj's Kueue queue name,
// or without the label when tj names no queue, and the Kueue priority
// class the TrainingJob is labelled with, if any.
func WithQueueLabel(labels map[string]string, tj *trainingv1alpha1.TrainingJob) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	if q := tj.Spec.QueueName; q != "" {
		out[trainingv1alpha1.LabelKueueQueueName] = q
	} else {
		delete(out, trainingv1alpha1.LabelKueueQueueName)
	}
	if p := tj.Labels[trainingv1alpha1.LabelKueuePriorityClass]; p != "" {
		out[trainingv1alpha1.LabelKueuePriorityClass] = p
	}
	return out
}
