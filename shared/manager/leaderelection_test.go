package manager

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
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
	// leaseWrites counts the replica's writes of the lease.
	leaseWrites atomic.Int32
	// stoppedLeading is when the replica's leader-only runnable was told
	// to stop, in Unix nanoseconds.
	stoppedLeading atomic.Int64
	// crashed cuts the replica off the API server, as a crash or a network
	// partition would: it can neither renew nor release its lease.
	crashed atomic.Bool
	run     *running
}

func newCandidate(t *testing.T, cfg Config, name string) *candidate {
	t.Helper()
	c := &candidate{leading: make(chan struct{})}
	path := leasePath(cfg, name)
	restConfig := rest.CopyConfig(env.Config)
	restConfig.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if c.crashed.Load() {
				return nil, errors.New("replica crashed")
			}
			if r.Method == http.MethodGet && r.URL.Path == path {
				c.leaseReads.Add(1)
			}
			if r.Method == http.MethodPut && r.URL.Path == path {
				c.leaseWrites.Add(1)
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
				c.stoppedLeading.Store(time.Now().UnixNano())
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

// withLeader returns a Config with leader election in a new namespace
// where a replica of the operator name already leads, so that a manager
// built from it starts as a standby.
func withLeader(t *testing.T, name, prefix string) Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.LeaderElect = true
	cfg.LeaderElectionNamespace = createNamespace(t, adminClientset(t), prefix)
	leader := newCandidate(t, cfg, name)
	leader.run = start(t, leader.mgr)
	waitClosed(t, "the first replica leads", leader.mgr.Elected(), timeout)
	return cfg
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

// TestRunReleasesLeaseOnCancel cancels Run's context once the replica
// leads and expects the lease released when Run returns, so a standby can
// take over at once. The second case forces the interleaving that a loaded
// machine produced by chance: the cancel lands during the first renewal, and
// the API server applies that renewal (its handler goes on after the client
// has gone) only after the elector's release has read the lease, so the
// release's optimistic write conflicts.
func TestRunReleasesLeaseOnCancel(t *testing.T) {
	testCases := map[string]struct {
		// renewalAppliedLate holds the first renewal as described above.
		renewalAppliedLate bool
	}{
		"cancelled while leading":                          {},
		"cancelled during the first renewal, applied late": {renewalAppliedLate: true},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
				t.Setenv(name, "")
			}
			cs := adminClientset(t)
			const operator = "run-test-operator"
			cfg := testConfig(t)
			cfg.LeaderElect = true
			cfg.LeaderElectionNamespace = createNamespace(t, cs, "run")
			// The lease client's timeout is half the renew deadline: long
			// enough here that only the cancel, never a slow machine, ends
			// the held renewal.
			cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 2*timeout, timeout, time.Second

			leading := make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.renewalAppliedLate {
				late := &lateRenewal{t: t, leasePath: leasePath(cfg, operator), leading: leading, cancel: cancel}
				cfg.RESTConfig = rest.CopyConfig(env.Config)
				cfg.RESTConfig.WrapTransport = late.wrap
				defer late.check()
			}
			opts := Options{
				Name: operator,
				Setup: func(mgr ctrl.Manager, _ Config) error {
					return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
						close(leading)
						<-ctx.Done()
						return nil
					}))
				},
			}
			done := make(chan error, 1)
			go func() { done <- Run(ctx, cfg, opts) }()

			waitClosed(t, "leader-only runnable started", leading, timeout)
			// lateRenewal cancels by itself, within the first renewal.
			if !tc.renewalAppliedLate {
				cancel()
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run() = %v after cancel, want nil", err)
				}
			case <-time.After(2 * timeout):
				t.Fatal("Run did not return after its context was cancelled")
			}

			lease, err := cs.CoordinationV1().Leases(cfg.LeaderElectionNamespace).Get(t.Context(), LeaderElectionID(operator), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if holder := lease.Spec.HolderIdentity; holder != nil && *holder != "" {
				t.Errorf("lease still held by %q after Run returned", *holder)
			}
		})
	}
}

func leasePath(cfg Config, operator string) string {
	return "/apis/coordination.k8s.io/v1/namespaces/" + cfg.LeaderElectionNamespace + "/leases/" + LeaderElectionID(operator)
}

// lateRenewal cancels the replica during its first renewal of the lease,
// answers the elector that the renewal was cancelled, and sends that
// renewal to the API server only after the next read of the lease by a live
// context (the release's read), as an API server that finishes a handler
// after its client has gone would apply it.
type lateRenewal struct {
	t         *testing.T
	leasePath string
	leading   <-chan struct{}
	cancel    context.CancelFunc

	mu sync.Mutex
	// held is the renewal waiting to be applied, with its body.
	held     *http.Request
	heldBody []byte
	// renewals counts PUTs of the lease; replayStatus is the API server's
	// answer to the held renewal once applied.
	renewals     int
	replayStatus int
}

func (l *lateRenewal) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path != l.leasePath {
			return rt.RoundTrip(r)
		}
		switch r.Method {
		case http.MethodPut:
			return l.holdFirstRenewal(rt, r)
		case http.MethodGet:
			return l.replayAfterRead(rt, r)
		}
		return rt.RoundTrip(r)
	})
}

// holdFirstRenewal cancels Run while the first renewal is in flight, keeps
// that renewal and fails it with the cancellation the elector sees.
func (l *lateRenewal) holdFirstRenewal(rt http.RoundTripper, r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.renewals++
	first := l.renewals == 1
	l.mu.Unlock()
	if !first {
		return rt.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	// The leader-only runnable runs, so the manager is fully up and its
	// stop has something to stop, as in production.
	select {
	case <-l.leading:
	case <-time.After(timeout):
		l.t.Error("leader-only runnable did not start during the first renewal")
	}
	l.cancel()
	// controller-runtime cancels the elector once the manager's runnables
	// have stopped; the renewal's context then ends.
	<-r.Context().Done()
	if err := r.Context().Err(); !errors.Is(err, context.Canceled) {
		l.t.Errorf("the held renewal ended with %v, want it cancelled by the manager's stop", err)
	}
	l.mu.Lock()
	l.held, l.heldBody = r.Clone(context.WithoutCancel(r.Context())), body
	l.mu.Unlock()
	return nil, r.Context().Err()
}

// replayAfterRead lets the first live read of the lease after the held
// renewal see the lease before that renewal, then applies the renewal.
func (l *lateRenewal) replayAfterRead(rt http.RoundTripper, r *http.Request) (*http.Response, error) {
	if r.Context().Err() != nil {
		return rt.RoundTrip(r)
	}
	l.mu.Lock()
	held, body := l.held, l.heldBody
	l.held = nil
	l.mu.Unlock()
	resp, err := rt.RoundTrip(r)
	if held == nil {
		return resp, err
	}
	held.Body = io.NopCloser(bytes.NewReader(body))
	replayed, replayErr := rt.RoundTrip(held)
	if replayErr != nil {
		l.t.Errorf("applying the held renewal: %v", replayErr)
		return resp, err
	}
	_ = replayed.Body.Close()
	l.mu.Lock()
	l.replayStatus = replayed.StatusCode
	l.mu.Unlock()
	return resp, err
}

// check fails the test if the interleaving did not happen, so the test
// cannot pass without exercising it.
func (l *lateRenewal) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.replayStatus != http.StatusOK {
		l.t.Errorf("the held renewal was applied with status %d after the release's read, want %d", l.replayStatus, http.StatusOK)
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
			cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod, cfg.RenewInterval = defaults.LeaseDuration, defaults.RenewDeadline, defaults.RetryPeriod, defaults.RenewInterval

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
			elected := time.Now()
			took := elected.Sub(stopped)
			if err := leader.run.stop(t); (err != nil) != tc.wantErr {
				t.Errorf("leader's manager returned %v, want an error: %v", err, tc.wantErr)
			}
			// Two leaders never run at once: the old one stopped leading
			// (its renewals unwritten for the renew deadline) before the
			// standby took over.
			if end := leader.stoppedLeading.Load(); end == 0 || time.Unix(0, end).After(elected) {
				t.Errorf("the old leader stopped leading at %v, after the standby was elected at %v", time.Unix(0, end), elected)
			}
			waitClosed(t, "standby's leader-only runnable started", standby.leading, timeout)
			t.Logf("%s: standby led %v after the leader stopped (lease %v, renew deadline %v, retry period %v, renew interval %v)",
				name, took.Round(time.Millisecond), cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod, cfg.RenewInterval)
		})
	}
}

// TestLeaderWritesItsLeaseOncePerRenewInterval: at rest the leader renews
// every retry period, which keeps a standby's takeover fast, but writes the
// lease only once per renew interval; a standby that watches the lease
// still sees it renewed, and does not take over.
func TestLeaderWritesItsLeaseOncePerRenewInterval(t *testing.T) {
	cs := adminClientset(t)
	const operator = "sparse-renewal-operator"
	cfg := testConfig(t)
	cfg.LeaderElect = true
	cfg.LeaderElectionNamespace = createNamespace(t, cs, "sparse")
	defaults := DefaultConfig()
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod, cfg.RenewInterval = defaults.LeaseDuration, defaults.RenewDeadline, defaults.RetryPeriod, defaults.RenewInterval

	leader := newCandidate(t, cfg, operator)
	leader.run = start(t, leader.mgr)
	waitClosed(t, "leader elected", leader.mgr.Elected(), timeout)
	standby := newCandidate(t, cfg, operator)
	standby.run = start(t, standby.mgr)

	// A window of several renew intervals: a write per retry period would
	// be 4 times as many. A slow machine writes fewer, never more.
	window := 4 * cfg.RenewInterval
	before := leader.leaseWrites.Load()
	time.Sleep(window)
	writes := leader.leaseWrites.Load() - before
	if limit := int32(window/cfg.RenewInterval) + 1; writes > limit {
		t.Errorf("the leader wrote its lease %d times in %v, want at most %d (one per renew interval of %v)", writes, window, limit, cfg.RenewInterval)
	}
	if writes == 0 {
		t.Errorf("the leader did not write its lease in %v", window)
	}
	if isClosed(standby.mgr.Elected()) {
		t.Error("the standby took over a lease that the leader kept renewing")
	}
	t.Logf("the leader wrote its lease %d times in %v (retry period %v, renew interval %v)", writes, window, cfg.RetryPeriod, cfg.RenewInterval)
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
