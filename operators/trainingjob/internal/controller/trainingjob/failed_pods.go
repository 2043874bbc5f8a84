package trainingjob

import (
	"cmp"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DefaultFailedPodsGrace is how long, after its child recorded the
// failure, a failed run waits for the failed pods its child counts to
// reach the operator's cache (awaitFailedPods). A watch that lags behind
// another by more is rare; a pod that never arrives (deleted before the
// operator saw it fail, or removed by the pod garbage collector) costs the
// job no more than this before it is explained without it.
const DefaultFailedPodsGrace = 5 * time.Second

// awaitFailedPods is how long the current run's failure still waits before
// it is explained and recorded; zero when it need not wait. The operator
// watches the run's child and its pods separately, and the two watches
// need not agree on their order: the child's failure can reach the cache
// before the failed pod that caused it, and a run explained then would be
// explained from the child alone (class Unknown, no exit code), which is
// what the restart decision reads and what status keeps. So while the
// child counts more failed pods than the cache holds of the run, the
// failure waits, for at most the grace after the time the child recorded
// it (by the reconciler's clock, so that a reconcile after an outage
// waits for nothing) or, when that is earlier, after this process first
// saw it wait (the clock of the child's controller may run ahead). The
// pod watch wakes the job when a failed pod arrives (podMatters); the
// requeue at the end of the grace is for the pod that never does. A run that outlived its deadline is explained
// without its pods (classifyRun), and a failure without a time cannot be
// bounded: neither waits.
func (r *Reconciler) awaitFailedPods(s *scope) time.Duration {
	st := s.state
	if st.Failed == nil || st.DeadlineExceeded || st.Failed.Time.IsZero() {
		return 0
	}
	var counted int32
	for _, role := range st.Roles {
		counted += role.Failed
	}
	if failedPods(s.pods) >= counted {
		return 0
	}
	grace := cmp.Or(r.FailedPodsGrace, DefaultFailedPodsGrace)
	// The child's controller dates the failure by its own clock: one
	// ahead of the operator's would put it in the future. The grace
	// counts from the earlier of that time and the first time this
	// process saw the failure wait.
	start := st.Failed.Time.Time
	if since := r.failureWaitsSince(s.tj, s.run, s.now); since.Before(start) {
		start = since
	}
	return max(start.Add(grace).Sub(s.now), 0)
}

// failedPods counts the pods that a child's controller counts as failed:
// those that failed, and those being deleted before they succeeded (the
// Job controller counts them as failed; package failure explains them as
// deleted).
func failedPods(pods []corev1.Pod) int32 {
	var n int32
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodFailed || !p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodSucceeded {
			n++
		}
	}
	return n
}
