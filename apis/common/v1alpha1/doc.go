// Package v1alpha1 holds the types that every ml-platform API group embeds:
// object references, accelerator requests, deletion policies and the standard
// condition vocabulary.
//
// +kubebuilder:object:generate=true
package v1alpha1
