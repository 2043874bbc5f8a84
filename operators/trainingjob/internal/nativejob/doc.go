// Package nativejob runs a TrainingJob's runs on Kubernetes' own Indexed
// batch/v1 Jobs: one Job per run with a headless Service for stable rank
// host names, and each framework's launcher environment computed from the
// completion index as the Kubeflow training-operator v1.8.1 provides it.
package nativejob
