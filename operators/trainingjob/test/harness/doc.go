// Package harness runs the TrainingJob operator in-process against a
// test API server, and the real Kubeflow training-operator binary next to
// it, for tests and benchmarks outside the controller package.
package harness
