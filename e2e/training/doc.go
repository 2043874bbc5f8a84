// Package training is the TrainingJob suite of the platform's e2e tests
// (issue 15, suite 1), run by make e2e on the kind cluster of make
// quickstart. Every test runs once per training backend
// ($ML_PLATFORM_E2E_TRAINING_BACKENDS, default "native"; "kubeflow" needs the umbrella's kubeflow.enabled): the PyTorch DDP
// sample succeeds; a worker pod deleted mid-training starts the next run,
// which resumes from the last checkpoint; a user error (exit 1) fails the
// job without a retry, with the reason in status; the TTL removes a
// finished job and its pods.
package training
