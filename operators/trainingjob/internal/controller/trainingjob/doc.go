// Package trainingjob reconciles TrainingJobs into Kubeflow training-operator
// jobs, one per run, and reports their progress in status.
package trainingjob
