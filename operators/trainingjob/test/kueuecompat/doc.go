// Package kueuecompat proves the TrainingJob operator against the real
// Kueue controller manager (built from its Go module, see
// operators/trainingjob/hack/kueue-bin.sh) on a real API server with the
// real Job controller: admission, quota, preemption and the absence of a
// fight over the Job. The tests are all in _test files.
package kueuecompat
