package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Accelerators requests GPUs (or other accelerators) for one pod. The
// platform team maps each Type to an extended resource name and node labels
// in the operator's admin configuration, so users ask for "a100" rather than
// spelling vendor resource names and node selectors themselves.
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.count > 0",message="accelerators.type needs accelerators.count greater than 0"
type Accelerators struct {
	// Count of accelerators per pod.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	Count int32 `json:"count,omitempty"`

	// Type of accelerator, one of the types the platform team configured
	// (for example "a100" or "t4"). Empty means the configured default type.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Type string `json:"type,omitempty"`
}

// Resources are the compute resources of one pod's main container, plus its
// accelerators.
type Resources struct {
	// Requests and limits of CPU, memory and ephemeral storage, as in a
	// container's resources. Accelerators are requested with Accelerators,
	// not here.
	// +optional
	corev1.ResourceRequirements `json:",inline"`

	// Accelerators for each pod.
	// +optional
	Accelerators *Accelerators `json:"accelerators,omitempty"`
}
