package manager

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAddedCacheRunsOnAStandby: a cache added with AddCache starts and
// syncs on a replica that does not lead, as the manager's own cache does,
// so a warm standby's controllers that watch it start before it leads.
// Added with mgr.Add, it would wait for leadership (the second case).
func TestAddedCacheRunsOnAStandby(t *testing.T) {
	const name = "addcache-test-operator"
	cfg := withLeader(t, name, "addcache")

	for _, tc := range []struct {
		name  string
		add   func(ctrl.Manager, cache.Cache) error
		syncs bool
	}{
		{"AddCache", AddCache, true},
		{"mgr.Add", func(mgr ctrl.Manager, c cache.Cache) error { return mgr.Add(c) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var extra cache.Cache
			standby, err := New(cfg, Options{Name: name, Setup: func(mgr ctrl.Manager, _ Config) error {
				c, err := cache.New(mgr.GetConfig(), cache.Options{
					Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
					ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {}},
				})
				if err != nil {
					return err
				}
				if _, err := c.GetInformer(context.Background(), &corev1.ConfigMap{}); err != nil {
					return err
				}
				extra = c
				return tc.add(mgr, c)
			}})
			if err != nil {
				t.Fatal(err)
			}
			start(t, standby)
			wait := 30 * time.Second
			if !tc.syncs {
				wait = 5 * time.Second
			}
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			if synced := extra.WaitForCacheSync(ctx); synced != tc.syncs {
				t.Errorf("the added cache synced on the standby: %v, want %v", synced, tc.syncs)
			}
			if isClosed(standby.Elected()) {
				t.Fatal("the standby leads: the test proves nothing")
			}
		})
	}
}
