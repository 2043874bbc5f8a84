// Package v1alpha1 defines the features.mlplatform.dev API: FeatureStore, a
// tenant's Feast feature store, and FeatureStoreBackend, a shared database
// server the platform team registers for FeatureStores to provision into.
//
// +kubebuilder:object:generate=true
// +groupName=features.mlplatform.dev
package v1alpha1
