// Package backend is what every TrainingJob backend shares: the small
// interface the reconciler talks to, the backend-neutral view of a run's
// child, and the pod template, names and labels both backends generate.
package backend
