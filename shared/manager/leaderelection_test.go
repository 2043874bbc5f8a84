package manager

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// candidate is one replica of an operator in the leader election test.
type candidate struct {
	mgr ctrl.Manager
	// leading closes when the replica's leader-only runnable starts.
	leading chan struct{}
	// leaseReads counts the replica's reads of the lease, which it makes
	// once per acquisition attempt.
	leaseReads atomic.Int32
	// crashed cuts the replica off the API server, as a crash or a network
	// partition would: it can neither renew nor release its lease.
	crashed atomic.Bool
	run     *running
}

func newCandidate(t *testing.T, cfg Config, name string) *candidate {
	t.Helper()
	c := &candidate{leading: make(chan struct{})}
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/" + cfg.LeaderElectionNamespace + "/leases/" + LeaderElectionID(name)
	restConfig := rest.CopyConfig(env.Config)
	restConfig.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if c.crashed.Load() {
				return nil, errors.New("replica crashed")
			}
			if r.Method == http.MethodGet && r.URL.Path == leasePath {
				c.leaseReads.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	cfg.RESTConfig = restConfig

	mgr, err := New(cfg, Options{
		Name: name,
		Setup: func(mgr ctrl.Manager, _ Config) error {
			// A RunnableFunc needs leader election, like a controller.
			return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				close(c.leading)
				<-ctx.Done()
				return nil
			}))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.mgr = mgr
	return c
}

func TestLeaderElectionHandsOverOnCancel(t *testing.T) {
	cs := adminClientset(t)
	const name = "leader-test-operator"
	cfg := testConfig(t)
	cfg.LeaderElect = true
	cfg.LeaderElectionNamespace = createNamespace(t, cs, "leader-election")
	// A long lease and a short retry period: without the release on
	// cancel, the second replica would wait for the lease to expire.
	cfg.LeaseDuration = 30 * time.Second
	cfg.RenewDeadline = 20 * time.Second
	cfg.RetryPeriod = 250 * time.Millisecond

	first := newCandidate(t, cfg, name)
	first.run = start(t, first.mgr)
	waitClosed(t, "first replica elected", first.mgr.Elected(), timeout)
	waitClosed(t, "first replica's leader-only runnable started", first.leading, timeout)

	lease, err := cs.CoordinationV1().Leases(cfg.LeaderElectionNamespace).Get(t.Context(), LeaderElectionID(name), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the lease named after the operator: %v", err)
	}
	firstHolder := *lease.Spec.HolderIdentity

	second := newCandidate(t, cfg, name)
	second.run = start(t, second.mgr)
	// Two reads mean the second replica found the lease held at least once
	// and tried again, so it has had the chance to (wrongly) take over.
	eventually(t, "second replica retries the held lease", func(context.Context) (bool, error) {
		return second.leaseReads.Load() >= 2, nil
	})
	if isClosed(second.mgr.Elected()) || isClosed(second.leading) {
		t.Fatal("second replica became leader while the first held the lease")
	}

	cancelled := time.Now()
	if err := first.run.stop(t); err != nil {
		t.Fatalf("first replica stopped with %v", err)
	}
	// Half the lease duration separates a released lease (taken over
	// within a retry period) from an expired one (a full lease duration).
	waitClosed(t, "second replica elected after the first was cancelled", second.mgr.Elected(), cfg.LeaseDuration/2)
	handoff := time.Since(cancelled)
	waitClosed(t, "second replica's leader-only runnable started", second.leading, timeout)
	t.Logf("leadership handed over %v after the first replica was cancelled (lease duration %v, retry period %v)",
		handoff.Round(time.Millisecond), cfg.LeaseDuration, cfg.RetryPeriod)

	lease, err = cs.CoordinationV1().Leases(cfg.LeaderElectionNamespace).Get(t.Context(), LeaderElectionID(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || *lease.Spec.HolderIdentity == firstHolder {
		t.Errorf("lease holder = %v after handover, want the second replica, not %q", lease.Spec.HolderIdentity, firstHolder)
	}
}

func TestRunReleasesLeaseOnCancel(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(name, "")
	}
	cs := adminClientset(t)
	const name = "run-test-operator"
	cfg := testConfig(t)
	cfg.LeaderElect = true
	cfg.LeaderElectionNamespace = createNamespace(t, cs, "run")

	leading := make(chan struct{})
	opts := Options{
		Name: name,
		Setup: func(mgr ctrl.Manager, _ Config) error {
			return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				close(leading)
				<-ctx.Done()
				return nil
			}))
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, opts) }()

	waitClosed(t, "leader-only runnable started", leading, timeout)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run() = %v after cancel, want nil", err)
		}
	case <-time.After(timeout):
		t.Fatal("Run did not return after its context was cancelled")
	}

	lease, err := cs.CoordinationV1().Leases(cfg.LeaderElectionNamespace).Get(t.Context(), LeaderElectionID(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder := lease.Spec.HolderIdentity; holder != nil && *holder != "" {
		t.Errorf("lease still held by %q after Run returned", *holder)
	}
}

// TestStandbyTakesOverAfterTheLeaderStops runs two replicas with the
// default lease timings and stops the leader, gracefully (it releases the
// lease) or by cutting it off the API server (a crash: the lease must
// expire). The standby must become leader either way; how long it took is
// logged, not asserted: these are the figures the chart documents.
func TestStandbyTakesOverAfterTheLeaderStops(t *testing.T) {
	testCases := map[string]struct {
		// stop stops the leader without waiting for it.
		stop func(leader *candidate)
		// wantErr is whether the leader's manager returns an error.
		wantErr bool
	}{
		"graceful shutdown": {
			stop: func(leader *candidate) { leader.run.cancel() },
		},
		// Cut off, the leader gives up after the renew deadline, and the
		// operator's process exits as its manager returns the error.
		"crash": {
			stop:    func(leader *candidate) { leader.crashed.Store(true) },
			wantErr: true,
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			cs := adminClientset(t)
			const operator = "failover-test-operator"
			cfg := testConfig(t)
			cfg.LeaderElect = true
			cfg.LeaderElectionNamespace = createNamespace(t, cs, "failover")
			defaults := DefaultConfig()
			cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = defaults.LeaseDuration, defaults.RenewDeadline, defaults.RetryPeriod

			leader := newCandidate(t, cfg, operator)
			leader.run = startUnchecked(t, leader.mgr)
			waitClosed(t, "first replica elected", leader.mgr.Elected(), timeout)
			standby := newCandidate(t, cfg, operator)
			standby.run = start(t, standby.mgr)
			eventually(t, "standby tries the held lease", func(context.Context) (bool, error) {
				return standby.leaseReads.Load() >= 2, nil
			})

			stopped := time.Now()
			tc.stop(leader)
			waitClosed(t, "standby elected after the leader stopped", standby.mgr.Elected(), timeout)
			took := time.Since(stopped)
			if err := leader.run.stop(t); (err != nil) != tc.wantErr {
				t.Errorf("leader's manager returned %v, want an error: %v", err, tc.wantErr)
			}
			waitClosed(t, "standby's leader-only runnable started", standby.leading, timeout)
			t.Logf("%s: standby led %v after the leader stopped (lease %v, renew deadline %v, retry period %v)",
				name, took.Round(time.Millisecond), cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod)
		})
	}
}

// startUnchecked starts mgr and stops it when the test ends, whatever its
// Start returns (a replica whose lease was lost returns an error).
func startUnchecked(t *testing.T, mgr ctrl.Manager) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { _ = r.stop(t) })
	return r
}
