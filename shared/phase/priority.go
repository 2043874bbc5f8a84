package phase

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ml-platform/ml-platform/shared/conditions"
)

// UnreconciledFirst is an event handler for a controller's own kind, watched
// beside For. On the priority queue, controller-runtime queues every object
// of a controller's first list at low priority, so that a restarted
// operator serves changes before it re-reads what it already converged.
// That list also holds what no operator has seen yet: a TrainingJob created
// while the operator started, or one whose spec changed while none ran.
// Such an object would wait behind every other one (32 s of 20 000
// TrainingJobs, `make bench-scale`). UnreconciledFirst queues it again at
// the default priority: the queue keeps an item's highest priority, so it
// goes before the objects that were already converged, among the changes
// of the moment.
//
// An object is unreconciled when none of its conditions was computed for
// its current generation (phase.Runner stamps each one it sets). The
// handler does nothing else: no update, delete or generic event, no object
// the operator already converged, and nothing on the FIFO queue, where For
// has queued every object in the order listed.
func UnreconciledFirst() handler.EventHandler {
	return unreconciledFirst{}
}

type unreconciledFirst struct{}

func (unreconciledFirst) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || !e.IsInInitialList || e.Object == nil {
		return
	}
	if o, ok := e.Object.(conditions.Object); !ok || Reconciled(o) {
		return
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(0)}, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
}

func (unreconciledFirst) Update(context.Context, event.UpdateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (unreconciledFirst) Delete(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (unreconciledFirst) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// Reconciled says whether a reconcile computed o's status for its current
// generation: one of its conditions carries that generation.
func Reconciled(o conditions.Object) bool {
	for _, c := range o.GetConditions() {
		if c.ObservedGeneration == o.GetGeneration() {
			return true
		}
	}
	return false
}
