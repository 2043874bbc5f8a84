package backend

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// The suspend flag and the Kueue queue label of a child, with the label's
// mark (AnnotationQueueFromSpec), have one owner each: these functions.
// The backends build a new child with them and the reconciler converges an
// existing one with them, so the two can never disagree.

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

// AnnotationQueueFromSpec on a child names the LocalQueue its Kueue queue
// label was set to from spec.queueName, by the operator. It tells such a
// label from the one Kueue's default-LocalQueue webhook puts on a child
// created without a queue: both can say "default", and only the first is
// the operator's to take off when spec.queueName is removed. A child
// labelled by an operator older than the mark has none, and its label is
// taken as Kueue's when it says "default" (QueueFromSpec).
const AnnotationQueueFromSpec = "training.mlplatform.dev/queue-from-spec"

// WithQueueMark returns annotations marking that the queue label is tj's
// spec.queueName, or without the mark when tj names no queue; the input is
// left alone, and nil without a queue stays nil.
func WithQueueMark(annotations map[string]string, tj *trainingv1alpha1.TrainingJob) map[string]string {
	out := maps.Clone(annotations)
	if q := tj.Spec.QueueName; q != "" {
		if out == nil {
			out = map[string]string{}
		}
		out[AnnotationQueueFromSpec] = q
	} else {
		delete(out, AnnotationQueueFromSpec)
	}
	return out
}

// QueueFromSpec is true when child's Kueue queue label was set from
// spec.queueName: the mark names the queue the label does.
func QueueFromSpec(child metav1.Object) bool {
	q := child.GetLabels()[trainingv1alpha1.LabelKueueQueueName]
	return q != "" && child.GetAnnotations()[AnnotationQueueFromSpec] == q
}
