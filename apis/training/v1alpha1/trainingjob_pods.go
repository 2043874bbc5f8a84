package v1alpha1

// WorkerPods is the number of pods of one run that take part in the
// training, the coordinating one included: spec.workers, which defaults to
// 1 (an object read before defaulting, or built in Go, may hold 0).
func (tj *TrainingJob) WorkerPods() int32 {
	return max(tj.Spec.Workers, 1)
}

// Pods is the number of pods of one run: the worker pods and the
// parameter servers (tensorflow only). It is the one rule the backends,
// the metrics and the CLI count pods by.
func (tj *TrainingJob) Pods() int32 {
	pods := tj.WorkerPods()
	if ps := tj.Spec.ParameterServers; ps != nil {
		pods += *ps
	}
	return pods
}
