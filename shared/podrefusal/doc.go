// Package podrefusal reads the events in which a workload controller says
// that the API server refused its pods, so that the object that owns the
// workload can say it too.
package podrefusal
