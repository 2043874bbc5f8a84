// Package requeue combines the requeue requests of a reconcile's phases.
package requeue

import ctrl "sigs.k8s.io/controller-runtime"

// Shortest keeps the earlier of two timed requeues; a result without
// RequeueAfter asks for none, so the other one wins.
func Shortest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0:
		return a
	case b.RequeueAfter < a.RequeueAfter:
		return b
	default:
		return a
	}
}
