// Package kubeflowjob translates a TrainingJob into the Kubeflow
// training-operator job of one run, as pure functions without client calls,
// and reads the parts of those jobs the operator acts on.
package kubeflowjob
