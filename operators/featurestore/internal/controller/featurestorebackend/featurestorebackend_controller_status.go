package featurestorebackend

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/phase"
)

// observations are what the phases found, the only input of the status.
type observations struct {
	users  users
	server serverCheck
}

// computeStatus sets the conditions of a backend that is not being
// deleted. kstatus: Ready once the admin connects with the needed
// privileges; Reconciling while it waits for the Secret or the server,
// which resolve without anybody's help; Stalled when a person must fix the
// Secret, the credentials, the privileges or the sslMode.
func computeStatus(b *featuresv1alpha1.FeatureStoreBackend, obs observations) {
	b.Status.FeatureStores = ptr.To(int32(len(obs.users.stores)))
	conditions.Remove(b, featuresv1alpha1.ConditionDeletionBlocked)
	msg := obs.server.message
	switch obs.server.outcome {
	case outcomeReady:
		conditions.MarkReady(b, commonv1alpha1.ReasonReconciled, msg)
	case outcomeSecretMissing:
		conditions.MarkReconciling(b, featuresv1alpha1.ReasonAdminSecretNotFound, msg)
	case outcomeSecretInvalid:
		conditions.MarkStalled(b, featuresv1alpha1.ReasonAdminSecretInvalid, msg)
	case outcomeRefused:
		conditions.MarkStalled(b, featuresv1alpha1.ReasonAuthenticationFailed, msg)
	case outcomeUnprivileged:
		conditions.MarkStalled(b, featuresv1alpha1.ReasonInsufficientPrivileges, msg)
	case outcomeUnverifiable:
		conditions.MarkStalled(b, featuresv1alpha1.ReasonUnverifiableTLS, msg)
	case outcomeUnavailable:
		conditions.MarkReconciling(b, featuresv1alpha1.ReasonServerUnavailable, msg)
	default:
		conditions.MarkReconciling(b, commonv1alpha1.ReasonProgressing, "Listing the FeatureStores that use the backend")
	}
}

// deletionBlocked says why a deleted backend is still there, for the
// finalizer to record as DeletionBlocked. Ready and the kstatus conditions
// keep their last values: the server was not checked again.
func deletionBlocked(b *featuresv1alpha1.FeatureStoreBackend, u users) error {
	b.Status.FeatureStores = ptr.To(int32(len(u.stores)))
	return finalizer.Blocked(featuresv1alpha1.ConditionDeletionBlocked, featuresv1alpha1.ReasonInUse, deletionBlockedMessage(u))
}

// maxNamed bounds how many users a message names.
const maxNamed = 10

func deletionBlockedMessage(u users) string {
	var parts []string
	if len(u.stores) > 0 {
		parts = append(parts, "FeatureStores "+nameSome(u.stores)+" still use it")
	}
	if len(u.pending) > 0 {
		parts = append(parts, "the handed-off cleanups of FeatureStores "+nameSome(u.pending)+" have not finished")
	}
	return "Deletion waits until no FeatureStore needs the backend for its cleanup: " + strings.Join(parts, "; and ") +
		". Delete those FeatureStores (or abandon their cleanup) to let the backend go"
}

func nameSome(names []string) string {
	if len(names) <= maxNamed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamed], ", "), len(names)-maxNamed)
}

// transitionEvents is the backend's event rule: Ready becoming True and a new
// reason for Ready being False. The users blocking a deletion are reported
// by the finalizer (deletionBlocked).
func transitionEvents(before, after []metav1.Condition) []phase.Event {
	beforeObj := &featuresv1alpha1.FeatureStoreBackend{Status: featuresv1alpha1.FeatureStoreBackendStatus{Conditions: before}}
	b := &featuresv1alpha1.FeatureStoreBackend{Status: featuresv1alpha1.FeatureStoreBackendStatus{Conditions: after}}
	ready, old := conditions.Get(b, commonv1alpha1.ConditionReady), conditions.Get(beforeObj, commonv1alpha1.ConditionReady)
	if ready == nil || (old != nil && old.Status == ready.Status && old.Reason == ready.Reason) {
		return nil
	}
	if ready.Status == metav1.ConditionTrue {
		return []phase.Event{{Type: corev1.EventTypeNormal, Reason: "Ready", Message: ready.Message}}
	}
	return []phase.Event{{Type: conditions.EventType(ready.Reason), Reason: ready.Reason, Message: ready.Message}}
}
