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
// accelerators. The rules refuse what the API server would refuse in the
// generated pod template (a negative quantity, a request above its limit, a
// claim the pod does not declare) and a zero CPU or memory limit, in which no
// container can run: otherwise the object is accepted and its pods are
// refused later, one FailedCreate event at a time. They name the keys they
// check: a rule over every key of these unbounded maps exceeds the API
// server's cost budget for CEL.
//
// +kubebuilder:validation:XValidation:rule="['cpu', 'memory', 'ephemeral-storage'].all(k, !has(self.requests) || !(k in self.requests) || !quantity(string(self.requests[k])).isLessThan(quantity('0')))",message="resources.requests of cpu, memory and ephemeral-storage may not be negative"
// +kubebuilder:validation:XValidation:rule="['cpu', 'memory', 'ephemeral-storage'].all(k, !has(self.limits) || !(k in self.limits) || !quantity(string(self.limits[k])).isLessThan(quantity('0')))",message="resources.limits of cpu, memory and ephemeral-storage may not be negative"
// +kubebuilder:validation:XValidation:rule="['cpu', 'memory'].all(k, !has(self.limits) || !(k in self.limits) || quantity(string(self.limits[k])).isGreaterThan(quantity('0')))",message="resources.limits of cpu and memory must be greater than 0: no container runs within a zero limit"
// +kubebuilder:validation:XValidation:rule="['cpu', 'memory', 'ephemeral-storage'].all(k, !has(self.requests) || !has(self.limits) || !(k in self.requests) || !(k in self.limits) || !quantity(string(self.limits[k])).isLessThan(quantity(string(self.requests[k]))))",message="resources.requests of cpu, memory and ephemeral-storage may not exceed their limits"
// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="resources.claims is not supported: the generated pods declare no resource claims"
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
