// Package progress receives the progress a training process reports over
// HTTPS, checks that the pod behind the caller's ServiceAccount token
// belongs to the TrainingJob it reports for, and publishes the reports in
// the TrainingJob's status.progress at most once per report interval, from
// the leader replica only.
package progress
