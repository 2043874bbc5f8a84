package notebook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/culling"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/phase"
)

// events are this reconcile's transitions, which the Runner records after
// the status write that records them succeeded. Events in a terminating
// namespace are refused by the API server; the recorder only logs that, so
// it never blocks anything.
func events(s *scope) []phase.Event {
	nb, before := s.nb, s.before
	var out []phase.Event
	add := func(eventType, reason, message string) {
		out = append(out, phase.Event{Type: eventType, Reason: reason, Message: message})
	}
	if d := s.decision; d != nil && d.Action == culling.Warn &&
		(before.Status.CullDeadline == nil || !before.Status.CullDeadline.Time.Equal(d.Deadline)) {
		why := "has had no kernel or terminal activity"
		if d.Reason == culling.ReasonMaxLifetime {
			why = "reaches its maximum lifetime"
		}
		add(corev1.EventTypeWarning, notebooksv1alpha1.ReasonCullWarning, fmt.Sprintf("The Jupyter server %s and will be stopped at %s unless it is used; the workspace is kept", why, d.Deadline.UTC().Format("2006-01-02T15:04:05Z")))
	}
	if s.justCulled {
		add(corev1.EventTypeNormal, notebooksv1alpha1.ConditionCulled, culledMessage(s.culled))
	}
	if s.restarted && !s.held {
		add(corev1.EventTypeNormal, notebooksv1alpha1.ReasonRestarted, "Started again at the user's request after a cull")
	}
	if q := conditions.Get(nb, notebooksv1alpha1.ConditionQueued); q != nil && q.Status == metav1.ConditionTrue && !conditions.IsTrue(before, notebooksv1alpha1.ConditionQueued) {
		add(corev1.EventTypeNormal, notebooksv1alpha1.ConditionQueued, q.Message)
	}
	wasPending := conditions.IsTrue(before, notebooksv1alpha1.ConditionUpdatePending)
	if s.deferred && !wasPending {
		add(corev1.EventTypeNormal, "UpdateDeferred", "A spec change that restarts the Jupyter server waits until no kernel is busy")
	}
	if wasPending && s.applied && s.stsWritten {
		add(corev1.EventTypeNormal, notebooksv1alpha1.ReasonUpdateApplied, "The deferred spec change was applied; the Jupyter server restarts")
	}
	if now := conditions.Get(nb, commonv1alpha1.ConditionReady); now != nil && (now.Reason == notebooksv1alpha1.ReasonPodStartFailed || now.Reason == commonv1alpha1.ReasonPodsRefused) {
		old := conditions.Get(before, commonv1alpha1.ConditionReady)
		if old == nil || old.Reason != now.Reason || old.Message != now.Message {
			add(corev1.EventTypeWarning, now.Reason, now.Message)
		}
	}
	if now := conditions.Get(nb, notebooksv1alpha1.ConditionWorkspaceResizePending); now != nil && now.Reason == notebooksv1alpha1.ReasonWorkspaceResizeRefused {
		old := conditions.Get(before, notebooksv1alpha1.ConditionWorkspaceResizePending)
		if old == nil || old.Reason != now.Reason || old.Message != now.Message {
			add(corev1.EventTypeWarning, now.Reason, now.Message)
		}
	}
	if s.stalled != "" {
		old := conditions.Get(before, commonv1alpha1.ConditionStalled)
		if old == nil || old.Message != s.stalledMsg {
			add(corev1.EventTypeWarning, s.stalled, s.stalledMsg)
		}
	}
	return out
}
