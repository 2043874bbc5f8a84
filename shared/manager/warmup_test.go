package manager

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// heldSource is a controller's source whose cache syncs only once release
// is closed; started tells that a replica started it.
type heldSource struct {
	release, started chan struct{}
}

func (s *heldSource) Start(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	close(s.started)
	return nil
}

func (s *heldSource) WaitForSync(ctx context.Context) error {
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ source.TypedSyncingSource[reconcile.Request] = &heldSource{}

// TestWarmStandbyIsReadyOnceItsCachesAreFilled: a warm standby's /readyz
// fails while a controller's cache is still filling and passes once it is
// filled, so that a rolling update stops the leader only when the new pod
// can act at once; a cold standby starts no source and is ready at once,
// as before.
func TestWarmStandbyIsReadyOnceItsCachesAreFilled(t *testing.T) {
	const name = "warmup-test-operator"
	cfg := withLeader(t, name, "warmup")

	for _, warm := range []bool{true, false} {
		t.Run(map[bool]string{true: "warm", false: "cold"}[warm], func(t *testing.T) {
			cfg := cfg
			cfg.WarmStandby = warm
			cfg.HealthProbeBindAddress = freeAddr(t)
			held := &heldSource{release: make(chan struct{}), started: make(chan struct{})}
			standby, err := New(cfg, Options{Name: name, Setup: func(mgr ctrl.Manager, _ Config) error {
				return ctrl.NewControllerManagedBy(mgr).Named("held-" + map[bool]string{true: "warm", false: "cold"}[warm]).WatchesRawSource(held).
					Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
			}})
			if err != nil {
				t.Fatal(err)
			}
			start(t, standby)
			readyz := func() int {
				resp, err := http.Get("http://" + cfg.HealthProbeBindAddress + "/readyz")
				if err != nil {
					return 0
				}
				_ = resp.Body.Close()
				return resp.StatusCode
			}
			eventually(t, "the probes serve", func(context.Context) (bool, error) { return readyz() != 0, nil })
			if warm {
				waitClosed(t, "the warm standby starts its controller's source", held.started, timeout)
				// Ten probes over a second: none may pass while the cache fills.
				for range 10 {
					if code := readyz(); code == http.StatusOK {
						t.Fatal("/readyz passes while the controller's cache is still filling")
					}
					time.Sleep(100 * time.Millisecond)
				}
				close(held.release)
			}
			eventually(t, "/readyz passes", func(context.Context) (bool, error) { return readyz() == http.StatusOK, nil })
			if !warm && isClosed(held.started) {
				t.Error("a cold standby started its controller's source")
			}
			if isClosed(standby.Elected()) {
				t.Fatal("the standby leads: the test proves nothing")
			}
		})
	}
}
