package trainingjob

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/phase"
)

// event is a Kubernetes event to emit once the status write succeeded.
type event = phase.Event

// ev makes an event.
func ev(eventType, reason, message string) phase.Event {
	return phase.Event{Type: eventType, Reason: reason, Message: message}
}

// transitionEvents returns an event for each transition people act on
// between the persisted status and the new one.
func transitionEvents(before, after []metav1.Condition) []phase.Event {
	var out []event
	became := func(t string, s metav1.ConditionStatus) *metav1.Condition {
		b, a := find(before, t), find(after, t)
		if a == nil || a.Status != s || (b != nil && b.Status == s) {
			return nil
		}
		return a
	}
	if c := became(trainingv1alpha1.ConditionFeatureStoresReady, metav1.ConditionFalse); c != nil {
		out = append(out, ev(conditions.EventType(c.Reason), "WaitingForFeatureStores", c.Message))
	}
	// A failed job is Stalled too; its Failed event says it once.
	if c := became(commonv1alpha1.ConditionStalled, metav1.ConditionTrue); c != nil && became(commonv1alpha1.ConditionFailed, metav1.ConditionTrue) == nil {
		out = append(out, ev(corev1.EventTypeWarning, c.Reason, c.Message))
	}
	if c := became(trainingv1alpha1.ConditionCheckpointReady, metav1.ConditionFalse); c != nil {
		out = append(out, ev(corev1.EventTypeWarning, "WaitingForCheckpointClaim", c.Message))
	}
	if e := refusalEvent(before, after); e != nil {
		out = append(out, *e)
	}
	if c := became(trainingv1alpha1.ConditionRestarting, metav1.ConditionTrue); c != nil {
		out = append(out, ev(corev1.EventTypeWarning, "Restarting", c.Message))
	}
	if c := became(trainingv1alpha1.ConditionQueued, metav1.ConditionTrue); c != nil {
		if c.Reason == ReasonEvicted {
			out = append(out, ev(corev1.EventTypeWarning, "Evicted", c.Message))
		} else {
			out = append(out, ev(corev1.EventTypeNormal, "Queued", c.Message))
		}
	}
	if c := became(trainingv1alpha1.ConditionQueued, metav1.ConditionFalse); c != nil && c.Reason == ReasonAdmitted {
		out = append(out, ev(corev1.EventTypeNormal, "Admitted", c.Message))
	}
	if c := became(commonv1alpha1.ConditionSuspended, metav1.ConditionTrue); c != nil {
		out = append(out, ev(corev1.EventTypeNormal, "Suspended", c.Message))
	}
	if b := find(before, commonv1alpha1.ConditionSuspended); b != nil && b.Status == metav1.ConditionTrue {
		if a := find(after, commonv1alpha1.ConditionSuspended); a != nil && a.Status == metav1.ConditionFalse {
			out = append(out, ev(corev1.EventTypeNormal, "Resumed", "The job was resumed"))
		}
	}
	// Created and Running get no event of their own: the conditions show
	// them, and the child records its own events (the Job controller's
	// SuccessfulCreate, Kubeflow's JobRunning). Leaving them out keeps a
	// whole lifecycle within six writes on both backends (the ranks'
	// NetworkPolicy, child create, three status patches, the terminal
	// event),
	// which matters when hundreds of jobs start at once, while every event
	// people act on stays.
	if c := became(commonv1alpha1.ConditionSucceeded, metav1.ConditionTrue); c != nil {
		out = append(out, ev(corev1.EventTypeNormal, "Succeeded", c.Message))
	}
	if c := became(commonv1alpha1.ConditionFailed, metav1.ConditionTrue); c != nil {
		out = append(out, ev(corev1.EventTypeWarning, "Failed", c.Message))
	}
	return out
}

func find(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// events are one reconcile's events: the transitions of the conditions,
// the checkpoint claim it created, and the names taken and pod issues not
// reported yet.
func (r *Reconciler) events(s *scope, before, tj *trainingv1alpha1.TrainingJob) []phase.Event {
	if s.stale {
		return nil
	}
	out := transitionEvents(before.Status.Conditions, tj.Status.Conditions)
	if claimCreationRecorded(s, before, tj) {
		out = append(out, phase.Event{Type: corev1.EventTypeNormal, Reason: "CheckpointClaimCreated", Message: s.claim.message})
	}
	issues := append(networkPolicyIssues(s), companionIssues(s)...)
	return append(out, r.reportOnce(tj, append(issues, podIssues(s.pods)...))...)
}
