package featurestore

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// emit records the reconcile's events after the status write: the phases'
// own (rotations), and one per condition transition, so an unchanged
// failure does not repeat its event on every retry.
func (r *Reconciler) emit(fs *featuresv1alpha1.FeatureStore, s *scope, before []metav1.Condition) {
	for _, e := range s.events {
		r.Recorder.Event(fs, e.kind, e.reason, e.message)
	}
	for _, t := range []string{featuresv1alpha1.ConditionOnlineStoreReady, featuresv1alpha1.ConditionOfflineStoreReady, featuresv1alpha1.ConditionRegistryReady} {
		c := conditions.Get(fs, t)
		if c == nil || c.Status == metav1.ConditionTrue || !conditionChanged(before, fs.Status.Conditions, t) {
			continue
		}
		r.Recorder.Event(fs, conditions.EventType(c.Reason, featuresv1alpha1.ReasonWaitingForServer), c.Reason, c.Message)
	}
	if conditions.IsTrue(fs, commonv1alpha1.ConditionReady) && conditionChanged(before, fs.Status.Conditions, commonv1alpha1.ConditionReady) {
		r.Recorder.Event(fs, corev1.EventTypeNormal, "Ready", conditions.Get(fs, commonv1alpha1.ConditionReady).Message)
	}
}
