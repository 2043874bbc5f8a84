// Package v1alpha1 defines Notebook (notebooks.mlplatform.dev/v1alpha1): a
// Jupyter server with a persistent workspace, secure access and
// activity-aware culling.
//
// +kubebuilder:object:generate=true
// +groupName=notebooks.mlplatform.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of Notebook.
var GroupVersion = schema.GroupVersion{Group: "notebooks.mlplatform.dev", Version: "v1alpha1"}

// AddToScheme registers Notebook and NotebookList. It is a plain function
// rather than a SchemeBuilder filled by init(), so registration is visible
// where it happens.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Notebook{}, &NotebookList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
