package v1alpha1

// LocalObjectReference names an object in the same namespace as the object
// that holds the reference. Cross-namespace references are deliberately not
// expressible: a tenant must not be able to point at another tenant's objects.
type LocalObjectReference struct {
	// Name of the referenced object, in the referrer's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// FeatureStoreReference names a FeatureStore (features.mlplatform.dev) in the
// referrer's namespace. The referrer mounts the store's Feast client
// configuration once the store is Ready; see FeatureStoreClientContract.
// Its name is at most 63 characters, as a FeatureStore's is: the name is
// also a label value selecting the store's servers, and a longer one could
// name no store anyway.
// +kubebuilder:validation:XValidation:rule="size(self.name) <= 63",message="a FeatureStore name is at most 63 characters: name an existing FeatureStore"
type FeatureStoreReference struct {
	LocalObjectReference `json:",inline"`
}
