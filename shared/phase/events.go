package phase

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// Event is a Kubernetes event the Runner records after the status write.
type Event struct {
	Type, Reason, Message string
}

// EventRule turns the conditions before and after a reconcile into events.
type EventRule func(before, after []metav1.Condition) []Event

// Transitions is the default EventRule. It reports a condition only when its
// status or reason changed, so an unchanged failure does not repeat its
// event on every retry:
//   - Ready, Succeeded and the kind's own conditions turning True give a
//     Normal event named after the condition;
//   - Failed turning True gives a Warning with its reason;
//   - a condition that is False with a new reason gives an event with that
//     reason, Normal or Warning by conditions.EventType (waits are the
//     kind's own waiting reasons);
//   - Reconciling and Stalled give none: Ready carries the same reason.
func Transitions(waits ...string) EventRule {
	return func(before, after []metav1.Condition) []Event {
		var out []Event
		for _, c := range after {
			if !changed(before, c) {
				continue
			}
			if e, ok := transitionEvent(c, waits); ok {
				out = append(out, e)
			}
		}
		return out
	}
}

func transitionEvent(c metav1.Condition, waits []string) (Event, bool) {
	switch {
	case c.Type == commonv1alpha1.ConditionReconciling || c.Type == commonv1alpha1.ConditionStalled:
		return Event{}, false
	case c.Type == commonv1alpha1.ConditionFailed && c.Status == metav1.ConditionTrue:
		return Event{corev1.EventTypeWarning, c.Reason, c.Message}, true
	case c.Status == metav1.ConditionTrue:
		return Event{corev1.EventTypeNormal, c.Type, c.Message}, true
	case c.Status == metav1.ConditionFalse && c.Type != commonv1alpha1.ConditionSucceeded:
		return Event{conditions.EventType(c.Reason, waits...), c.Reason, c.Message}, true
	}
	return Event{}, false
}

// changed reports whether c is new or differs from its predecessor in status
// or reason.
func changed(before []metav1.Condition, c metav1.Condition) bool {
	for _, b := range before {
		if b.Type == c.Type {
			return b.Status != c.Status || b.Reason != c.Reason
		}
	}
	return true
}

// OnConditions adapts an EventRule over conditions to the Runner's Events.
func OnConditions[S any, T Object](rule EventRule) func(s S, before, after T) []Event {
	return func(_ S, before, after T) []Event {
		return rule(before.GetConditions(), after.GetConditions())
	}
}
