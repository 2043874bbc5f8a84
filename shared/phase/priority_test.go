package phase

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
)

// widget is a Widget at generation gen whose Ready condition was computed
// for generation observed (none when observed is 0).
func widget(name string, gen, observed int64) *samplev1alpha1.Widget {
	w := &samplev1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, Generation: gen}}
	if observed > 0 {
		w.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: observed}}
	}
	return w
}

// listed delivers w as the informer's first list does, to the handler For
// installs and to UnreconciledFirst, as a controller watching both would.
func listed(q workqueue.TypedRateLimitingInterface[reconcile.Request], w *samplev1alpha1.Widget) {
	e := event.CreateEvent{Object: w, IsInInitialList: true}
	(&handler.EnqueueRequestForObject{}).Create(context.Background(), e, q)
	UnreconciledFirst().Create(context.Background(), e, q)
}

func TestUnreconciledFirstPutsWhatNoReconcileSawBeforeTheConverged(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("unreconciled-first")
	defer q.ShutDown()
	for i := range 200 {
		listed(q, widget(fmt.Sprintf("converged-%03d", i), 2, 2))
	}
	// Created while the operator started: no status yet.
	listed(q, widget("new", 1, 0))
	for i := range 200 {
		listed(q, widget(fmt.Sprintf("later-%03d", i), 1, 1))
	}
	// Its spec changed while no operator ran.
	listed(q, widget("edited", 4, 3))
	// A change of the moment, which For queues at the default priority.
	(&handler.EnqueueRequestForObject{}).Create(context.Background(), event.CreateEvent{Object: widget("created-now", 1, 0)}, q)

	if got, want := q.Len(), 403; got != want {
		t.Fatalf("queue holds %d items, want %d: every object once", got, want)
	}
	first := map[string]bool{}
	for range 3 {
		req, prio, _ := q.GetWithPriority()
		if prio != 0 {
			t.Errorf("%s handed out at priority %d, want 0", req.Name, prio)
		}
		first[req.Name] = true
		q.Done(req)
	}
	for _, name := range []string{"new", "edited", "created-now"} {
		if !first[name] {
			t.Errorf("the first three items handed out are %v, want new, edited and created-now before the 400 converged", first)
		}
	}
	req, prio, _ := q.GetWithPriority()
	if prio != handler.LowPriority || req.Name != "converged-000" {
		t.Errorf("fourth item %s at priority %d, want converged-000 at %d, in list order", req.Name, prio, handler.LowPriority)
	}
}

func TestUnreconciledFirstLeavesOtherEventsAndTheFIFOQueueAlone(t *testing.T) {
	pq := priorityqueue.New[reconcile.Request]("unreconciled-first-events")
	defer pq.ShutDown()
	fifo := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer fifo.ShutDown()
	h := UnreconciledFirst()
	ctx := context.Background()
	fresh := widget("fresh", 1, 0)
	for _, q := range []workqueue.TypedRateLimitingInterface[reconcile.Request]{pq, fifo} {
		// After the first list an object's creation is For's to queue.
		h.Create(ctx, event.CreateEvent{Object: fresh}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: fresh, ObjectNew: fresh}, q)
		h.Delete(ctx, event.DeleteEvent{Object: fresh}, q)
		h.Generic(ctx, event.GenericEvent{Object: fresh}, q)
		h.Create(ctx, event.CreateEvent{Object: widget("converged", 2, 2), IsInInitialList: true}, q)
	}
	h.Create(ctx, event.CreateEvent{Object: fresh, IsInInitialList: true}, fifo)
	if pq.Len() != 0 || fifo.Len() != 0 {
		t.Errorf("queued %d items on the priority queue and %d on the FIFO queue, want none", pq.Len(), fifo.Len())
	}
}

func TestReconciled(t *testing.T) {
	for _, tc := range []struct {
		w    *samplev1alpha1.Widget
		want bool
	}{
		{widget("none", 1, 0), false},
		{widget("current", 3, 3), true},
		{widget("stale", 3, 2), false},
	} {
		if got := Reconciled(tc.w); got != tc.want {
			t.Errorf("Reconciled(%s) = %v, want %v", tc.w.Name, got, tc.want)
		}
	}
}
