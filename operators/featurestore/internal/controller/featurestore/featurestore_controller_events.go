package featurestore

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/phase"
)

// events are the reconcile's events, which the Runner records after the
// status write: the phases' own (rotations), and one per condition
// transition, so an unchanged failure does not repeat its event on every
// retry.
func events(s *scope, old, fs *featuresv1alpha1.FeatureStore) []phase.Event {
	before := old.Status.Conditions
	out := slices.Clone(s.events)
	for _, t := range []string{featuresv1alpha1.ConditionOnlineStoreReady, featuresv1alpha1.ConditionOfflineStoreReady, featuresv1alpha1.ConditionRegistryReady} {
		c := conditions.Get(fs, t)
		if c == nil || c.Status == metav1.ConditionTrue || !conditionChanged(before, fs.Status.Conditions, t) {
			continue
		}
		out = append(out, phase.Event{Type: conditions.EventType(c.Reason, featuresv1alpha1.ReasonWaitingForServer), Reason: c.Reason, Message: c.Message})
	}
	if np := s.networkPolicyFailure; np != nil && conditionChanged(before, fs.Status.Conditions, commonv1alpha1.ConditionStalled) {
		out = append(out, phase.Event{Type: corev1.EventTypeWarning, Reason: reasonFor(np.outcome), Message: np.message})
	}
	if conditions.IsTrue(fs, commonv1alpha1.ConditionReady) && conditionChanged(before, fs.Status.Conditions, commonv1alpha1.ConditionReady) {
		out = append(out, phase.Event{Type: corev1.EventTypeNormal, Reason: "Ready", Message: conditions.Get(fs, commonv1alpha1.ConditionReady).Message})
	}
	return out
}
