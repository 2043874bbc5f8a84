// Package v1alpha1 defines TrainingJob (training.mlplatform.dev/v1alpha1): a
// distributed training run that the trainingjob-operator translates into a
// Kubeflow training-operator job.
//
// +kubebuilder:object:generate=true
// +groupName=training.mlplatform.dev
package v1alpha1
