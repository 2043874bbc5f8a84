package v1alpha1

// QueueStatus is a queued object's place in its Kueue LocalQueue; the
// TrainingJob and the Notebook show it the same way while Kueue has not
// admitted their workload.
type QueueStatus struct {
	// LocalQueue is the Kueue LocalQueue the workload waits in.
	LocalQueue string `json:"localQueue"`
	// Position is the workload's place among the LocalQueue's pending
	// workloads, starting at 1, as Kueue's visibility API
	// (visibility.kueue.x-k8s.io) reported it at the last refresh; absent
	// when it is not known (the Queued condition says why). It is
	// refreshed periodically, not on every change of the queue.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Position *int32 `json:"position,omitempty"`
}
