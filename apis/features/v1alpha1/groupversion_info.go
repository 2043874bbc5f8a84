package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this package's kinds.
var GroupVersion = schema.GroupVersion{Group: "features.mlplatform.dev", Version: "v1alpha1"}

// AddToScheme registers FeatureStore and FeatureStoreBackend.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&FeatureStore{}, &FeatureStoreList{},
		&FeatureStoreBackend{}, &FeatureStoreBackendList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
