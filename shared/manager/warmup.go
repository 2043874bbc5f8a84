package manager

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// warmupRunnable is what controller-runtime's manager warms up before its
// replica leads: a controller with EnableWarmup starts its sources and
// waits for their caches then.
type warmupRunnable interface {
	manager.Runnable
	manager.LeaderElectionRunnable
	Warmup(context.Context) error
}

// warmups is the manager an operator's Setup adds its controllers to: it
// counts the controllers whose caches are not filled yet, for the
// readiness check of a warm standby.
type warmups struct {
	ctrl.Manager
	pending atomic.Int64
}

// Add counts a controller's warmup until it has returned.
func (w *warmups) Add(r manager.Runnable) error {
	c, ok := r.(warmupRunnable)
	if !ok {
		return w.Manager.Add(r)
	}
	w.pending.Add(1)
	return w.Manager.Add(&countedWarmup{warmupRunnable: c, done: func() { w.pending.Add(-1) }})
}

// ready is the readiness check of a warm standby: ready once every
// controller's caches are filled. A Deployment's rolling update stops the
// old pods (among them the leader) only once the new ones are ready, so
// the replica that takes over acts at once, even with one replica, where
// the rollout's new pod is the only standby there ever is: with 20 000
// TrainingJobs a replica that was ready before its caches were filled took
// 5 to 7 s after the leader's SIGTERM to act on a new object, listing
// every object first.
func (w *warmups) ready(*http.Request) error {
	if n := w.pending.Load(); n > 0 {
		return fmt.Errorf("%d controllers are still filling their caches", n)
	}
	return nil
}

// countedWarmup is a controller whose Warmup reports its end, once.
type countedWarmup struct {
	warmupRunnable
	once atomic.Bool
	done func()
}

func (c *countedWarmup) Warmup(ctx context.Context) error {
	err := c.warmupRunnable.Warmup(ctx)
	if err == nil && c.once.CompareAndSwap(false, true) {
		c.done()
	}
	return err
}
