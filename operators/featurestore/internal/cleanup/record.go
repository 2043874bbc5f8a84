package cleanup

import (
	"k8s.io/apimachinery/pkg/api/meta"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

// RecordOf returns the FeatureStore's record of the backends on which its
// stores may exist. A FeatureStore provisioned by an operator older than
// the record has none; its record is inferred from the rest of its status
// (Inferred).
func RecordOf(fs *featuresv1alpha1.FeatureStore) featuresv1alpha1.ProvisioningRecord {
	if fs.Status.Provisioning != nil {
		return *fs.Status.Provisioning
	}
	return Inferred(fs)
}

// Inferred is the record of a FeatureStore that has none. A store counts
// as possibly created unless its status shows that the operator never
// reached its server: no condition at all (never reconciled), or a backend
// that did not exist or was of the wrong kind at the last look, with
// nothing provisioned before (the published endpoint stays once a store
// was provisioned). Every other state, a server that did not answer in
// the middle of provisioning included, may have left something behind.
func Inferred(fs *featuresv1alpha1.FeatureStore) featuresv1alpha1.ProvisioningRecord {
	maybe := func(backend, condition string, provisioned *featuresv1alpha1.ProvisionedStore) string {
		if backend == "" {
			return ""
		}
		if provisioned != nil {
			return backend
		}
		c := meta.FindStatusCondition(fs.Status.Conditions, condition)
		if c == nil || c.Reason == commonv1alpha1.ReasonDependencyNotFound || c.Reason == featuresv1alpha1.ReasonBackendMismatch {
			return ""
		}
		return backend
	}
	return featuresv1alpha1.ProvisioningRecord{
		OnlineStoreBackend:  maybe(fs.Spec.OnlineStore.Backend, featuresv1alpha1.ConditionOnlineStoreReady, fs.Status.OnlineStore),
		OfflineStoreBackend: maybe(fs.Spec.OfflineStore.Backend, featuresv1alpha1.ConditionOfflineStoreReady, fs.Status.OfflineStore),
		RegistryBackend:     maybe(fs.Spec.Registry.Backend, featuresv1alpha1.ConditionRegistryReady, fs.Status.Registry),
	}
}

// ProvisionedPlan is the plan for what the FeatureStore may really have
// created: the stores its record names, on the recorded backends. The
// cleanup, its hand-off and the events of a Retain policy or an abandoned
// cleanup follow it, so a store that never reached its server (a backend
// missing or of the wrong kind) neither keeps its FeatureStore waiting nor
// is named as left behind.
func ProvisionedPlan(fs *featuresv1alpha1.FeatureStore) Plan {
	rec := RecordOf(fs)
	p := PlanFor(fs)
	p.Redis = rec.OnlineStoreBackend
	p.Postgres = map[string]string{}
	if rec.OfflineStoreBackend != "" {
		p.Postgres[KindOffline] = rec.OfflineStoreBackend
	}
	if rec.RegistryBackend != "" {
		p.Postgres[KindRegistry] = rec.RegistryBackend
	}
	return p
}
