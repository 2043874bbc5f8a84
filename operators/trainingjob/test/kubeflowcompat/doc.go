// Package kubeflowcompat proves, with tests only, that the real Kubeflow
// training-operator v1.8.1 accepts the jobs the operator generates and runs
// them: it creates their pods and Services.
package kubeflowcompat
