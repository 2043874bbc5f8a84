// Package restart decides, without client calls, whether a failed run of a
// TrainingJob is followed by a new run and when that run may start.
package restart
