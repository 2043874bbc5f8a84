package featurestore

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// observations are what the phases found, the only input of the status.
type observations struct {
	online, offline, registry storeResult
	clientConfig              bool
	// clientConfigErr is a foreign object in the client configuration's
	// place.
	clientConfigErr  error
	rotationDeferred bool
	// credentials is why the credentials could not be loaded; every
	// store shares that state then.
	credentials *storeResult
	// networkPolicy is why the managed servers' NetworkPolicy could not
	// be written; nil when it was, or when none is wanted.
	networkPolicy *storeResult
}

// computeStatus sets every condition and the published fields from the
// observations. It keeps what a store provisioned earlier while the store
// is merely unreachable, because the names do not change.
func computeStatus(fs *featuresv1alpha1.FeatureStore, obs observations) {
	if obs.credentials != nil {
		obs.online, obs.offline, obs.registry = *obs.credentials, *obs.credentials, *obs.credentials
	}
	stores := []struct {
		condition string
		res       storeResult
		field     **featuresv1alpha1.ProvisionedStore
	}{
		{featuresv1alpha1.ConditionOnlineStoreReady, obs.online, &fs.Status.OnlineStore},
		{featuresv1alpha1.ConditionOfflineStoreReady, obs.offline, &fs.Status.OfflineStore},
		{featuresv1alpha1.ConditionRegistryReady, obs.registry, &fs.Status.Registry},
	}
	var stalled, waiting *storeResult
	for i := range stores {
		st := &stores[i]
		reason := reasonFor(st.res.outcome)
		if st.res.outcome == outcomeReady {
			conditions.MarkTrue(fs, st.condition, commonv1alpha1.ReasonReconciled, st.res.message)
			*st.field = st.res.provisioned
			continue
		}
		conditions.MarkFalse(fs, st.condition, reason, st.res.message)
		switch st.res.outcome {
		case outcomeConflict, outcomeNameTaken, outcomeMismatch, outcomeRejected, outcomeUnverifiable, outcomeReserved:
			if stalled == nil {
				stalled = &st.res
			}
		default:
			if waiting == nil {
				waiting = &st.res
			}
		}
	}
	// Managed servers without their own NetworkPolicy admit whatever the
	// namespace's other policies let in: the store is not Ready until a
	// person frees the name.
	if stalled == nil && obs.networkPolicy != nil {
		stalled = obs.networkPolicy
	}
	if obs.clientConfig {
		fs.Status.ClientConfig = &commonv1alpha1.FeatureStoreClientConfig{
			SecretName: ClientSecretName(fs.Name),
			Key:        commonv1alpha1.FeatureStoreConfigKey,
		}
	}
	switch {
	case stalled != nil:
		conditions.MarkStalled(fs, reasonFor(stalled.outcome), stalled.message)
	case obs.clientConfigErr != nil:
		conditions.MarkStalled(fs, commonv1alpha1.ReasonNameTaken, "Client configuration: "+obs.clientConfigErr.Error())
	case waiting != nil:
		conditions.MarkReconciling(fs, reasonFor(waiting.outcome), waiting.message)
	case !obs.clientConfig:
		conditions.MarkReconciling(fs, commonv1alpha1.ReasonProgressing, "Publishing the Feast client configuration")
	default:
		msg := fmt.Sprintf("Every store accepts connections; the Feast client configuration is in Secret %s", fs.Status.ClientConfig.SecretName)
		if obs.rotationDeferred {
			msg += "; a requested credential rotation waits for the current grace period to end"
		}
		conditions.MarkReady(fs, commonv1alpha1.ReasonReconciled, msg)
	}
}

func reasonFor(o outcome) string {
	switch o {
	case outcomeReady:
		return commonv1alpha1.ReasonReconciled
	case outcomeWaiting:
		return featuresv1alpha1.ReasonWaitingForServer
	case outcomeUnavailable:
		return featuresv1alpha1.ReasonServerUnavailable
	case outcomeNotFound:
		return commonv1alpha1.ReasonDependencyNotFound
	case outcomeMismatch:
		return featuresv1alpha1.ReasonBackendMismatch
	case outcomeConflict:
		return featuresv1alpha1.ReasonConflict
	case outcomeNameTaken:
		return commonv1alpha1.ReasonNameTaken
	case outcomeRejected:
		return commonv1alpha1.ReasonChildRejected
	case outcomeUnverifiable:
		return featuresv1alpha1.ReasonUnverifiableTLS
	case outcomeReserved:
		return commonv1alpha1.ReasonNamespaceReserved
	default:
		return commonv1alpha1.ReasonProgressing
	}
}

// conditionChanged reports whether a condition's status or reason differs
// between two condition lists, for events on transitions only.
func conditionChanged(before []metav1.Condition, after []metav1.Condition, t string) bool {
	var b, a *metav1.Condition
	for i := range before {
		if before[i].Type == t {
			b = &before[i]
		}
	}
	for i := range after {
		if after[i].Type == t {
			a = &after[i]
		}
	}
	if a == nil {
		return false
	}
	return b == nil || b.Status != a.Status || b.Reason != a.Reason
}
