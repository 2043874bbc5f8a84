package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// Object is an API object whose status carries metav1.Conditions.
type Object interface {
	metav1.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// Set sets a condition, stamping the object's current generation as its
// observedGeneration. LastTransitionTime changes only when Status changes,
// so setting an unchanged condition again changes nothing and costs no write.
func Set(obj Object, condType string, status metav1.ConditionStatus, reason, message string) {
	conds := obj.GetConditions()
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
	obj.SetConditions(conds)
}

// KeepTransitionTimes gives each condition of obj that has the same status
// in before (the conditions as read) its LastTransitionTime from there. A
// reconcile that removes a condition and sets it again, as status rules that
// start from a clean slate do, has not changed it, and must not write a
// new time (nor wake Argo CD or a watching CLI) at every reconcile.
func KeepTransitionTimes(before []metav1.Condition, obj Object) {
	conds := obj.GetConditions()
	changed := false
	for i := range conds {
		c := &conds[i]
		if old := meta.FindStatusCondition(before, c.Type); old != nil && old.Status == c.Status && !old.LastTransitionTime.Equal(&c.LastTransitionTime) {
			c.LastTransitionTime, changed = old.LastTransitionTime, true
		}
	}
	if changed {
		obj.SetConditions(conds)
	}
}

// MarkTrue sets a condition to True.
func MarkTrue(obj Object, condType, reason, message string) {
	Set(obj, condType, metav1.ConditionTrue, reason, message)
}

// MarkFalse sets a condition to False.
func MarkFalse(obj Object, condType, reason, message string) {
	Set(obj, condType, metav1.ConditionFalse, reason, message)
}

// Remove deletes a condition; it is a no-op when the condition is absent.
func Remove(obj Object, condType string) {
	conds := obj.GetConditions()
	if meta.RemoveStatusCondition(&conds, condType) {
		obj.SetConditions(conds)
	}
}

// Get returns the condition of the given type, or nil.
func Get(obj Object, condType string) *metav1.Condition {
	return meta.FindStatusCondition(obj.GetConditions(), condType)
}

// IsTrue reports whether the condition is present and True.
func IsTrue(obj Object, condType string) bool {
	return meta.IsStatusConditionTrue(obj.GetConditions(), condType)
}

// IsCurrent reports whether the condition is present and was computed for
// the object's current generation.
func IsCurrent(obj Object, condType string) bool {
	c := Get(obj, condType)
	return c != nil && c.ObservedGeneration == obj.GetGeneration()
}

// The kstatus helpers below keep Ready, Reconciling and Stalled consistent.
// kstatus treats Reconciling and Stalled as "abnormal-true" conditions: they
// are present only while True, so tools that read them (Helm 4 --wait, Flux,
// Argo CD) see a Current object once neither is there.

// MarkReady says a long-running object serves its purpose.
func MarkReady(obj Object, reason, message string) {
	MarkTrue(obj, commonv1alpha1.ConditionReady, reason, message)
	Remove(obj, commonv1alpha1.ConditionReconciling)
	Remove(obj, commonv1alpha1.ConditionStalled)
}

// MarkReconciling says the operator is making progress towards the desired
// state and expects to get there without help. Ready becomes False with the
// same reason and message.
func MarkReconciling(obj Object, reason, message string) {
	MarkTrue(obj, commonv1alpha1.ConditionReconciling, reason, message)
	MarkFalse(obj, commonv1alpha1.ConditionReady, reason, message)
	Remove(obj, commonv1alpha1.ConditionStalled)
}

// MarkStalled says the operator cannot make progress without a change from a
// person. Ready becomes False with the same reason and message.
func MarkStalled(obj Object, reason, message string) {
	MarkTrue(obj, commonv1alpha1.ConditionStalled, reason, message)
	MarkFalse(obj, commonv1alpha1.ConditionReady, reason, message)
	Remove(obj, commonv1alpha1.ConditionReconciling)
}

// MarkSucceeded records the successful end of a bounded object. Terminal
// conditions are sticky: callers must not re-infer them from children that
// may have been cleaned up since.
func MarkSucceeded(obj Object, reason, message string) {
	MarkTrue(obj, commonv1alpha1.ConditionSucceeded, reason, message)
	MarkFalse(obj, commonv1alpha1.ConditionFailed, reason, message)
	Remove(obj, commonv1alpha1.ConditionReconciling)
	Remove(obj, commonv1alpha1.ConditionStalled)
}

// MarkFailed records the unsuccessful end of a bounded object.
func MarkFailed(obj Object, reason, message string) {
	MarkTrue(obj, commonv1alpha1.ConditionFailed, reason, message)
	MarkFalse(obj, commonv1alpha1.ConditionSucceeded, reason, message)
	Remove(obj, commonv1alpha1.ConditionReconciling)
	Remove(obj, commonv1alpha1.ConditionStalled)
}

// IsFinished reports whether a bounded object has reached a terminal state.
func IsFinished(obj Object) bool {
	return IsTrue(obj, commonv1alpha1.ConditionSucceeded) || IsTrue(obj, commonv1alpha1.ConditionFailed)
}
