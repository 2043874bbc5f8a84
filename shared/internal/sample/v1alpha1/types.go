// Package v1alpha1 defines Widget (testing.mlplatform.dev/v1alpha1), a test-only
// kind whose reconciler provisions a fake external resource behind a
// finalizer.
//
// +kubebuilder:object:generate=true
// +groupName=testing.mlplatform.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of Widget.
var GroupVersion = schema.GroupVersion{Group: "testing.mlplatform.dev", Version: "v1alpha1"}

// AddToScheme registers Widget.
var AddToScheme = func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// WidgetSpec is what the user asks for.
type WidgetSpec struct {
	// Message is stored in the fake external system.
	// +optional
	Message string `json:"message,omitempty"`
}

// WidgetStatus is what the operator observed.
type WidgetStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Echo is the message the external system holds.
	// +optional
	Echo string `json:"echo,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Widget is a test-only kind.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=mlplatform
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec,omitempty"`
	Status WidgetStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (w *Widget) GetConditions() []metav1.Condition { return w.Status.Conditions }

// SetConditions replaces the status conditions.
func (w *Widget) SetConditions(c []metav1.Condition) { w.Status.Conditions = c }

// WidgetList is a list of Widgets.
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}
