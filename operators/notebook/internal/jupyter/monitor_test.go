package jupyter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// hangingServers are Jupyter servers that accept every request and never
// answer until the test ends; active counts the requests they hold.
type hangingServers struct {
	release      chan struct{}
	active, most atomic.Int32
}

func newHangingServers(t *testing.T) *hangingServers {
	h := &hangingServers{release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	return h
}

func (h *hangingServers) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := h.active.Add(1)
		defer h.active.Add(-1)
		raiseTo(&h.most, n)
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		// Close waits for the requests in flight, which hang.
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// raiseTo sets most to n unless it holds more already.
func raiseTo(most *atomic.Int32, n int32) {
	for {
		m := most.Load()
		if n <= m || most.CompareAndSwap(m, n) {
			return
		}
	}
}

// answering is a Jupyter server with one idle kernel.
func answering(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/status":
			_, _ = w.Write([]byte(`{"connections": 0}`))
		case "/api/kernels":
			_, _ = w.Write([]byte(`[{"id": "k", "execution_state": "idle", "last_activity": "2026-01-01T10:00:00Z"}]`))
		default:
			_, _ = w.Write([]byte(`[]`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// doneLog records the notebooks a Monitor reports probed.
type doneLog struct {
	mu    sync.Mutex
	probe map[types.NamespacedName]int
}

func (d *doneLog) done(_ context.Context, nb types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.probe == nil {
		d.probe = map[types.NamespacedName]int{}
	}
	d.probe[nb]++
}

func (d *doneLog) count(nb types.NamespacedName) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.probe[nb]
}

// startMonitor runs a Monitor until the test ends, and checks that it
// stops, with every probe it started, once asked to.
func startMonitor(t *testing.T, o Observer, clk clock.PassiveClock, limits Limits, done func(context.Context, types.NamespacedName)) *Monitor {
	t.Helper()
	m := NewMonitor(o, clk, limits, done)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		_ = m.Start(ctx)
		close(stopped)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(testenv.EventuallyTimeout):
			t.Errorf("the Monitor did not stop within %v of its context's end: probes in flight leaked", testenv.EventuallyTimeout)
		}
	})
	return m
}

func run(uid string) Run {
	return Run{Notebook: types.UID(uid), StartedAt: "2026-01-01T09:00:00Z", Pod: types.UID(uid + "-pod")}
}

// TestOneNamespaceCannotTakeEveryProbeSlot: namespace a runs more servers
// that never answer than the Monitor has slots, and asks for them first.
// Namespace b's probe still runs and answers while every one of a's
// hangs: a's probes in flight never exceed the per-namespace limit. The
// probe's timeout is ten minutes, far past the test's deadline, so b's
// answer cannot come from a slot that a's timed-out probes freed.
func TestOneNamespaceCannotTakeEveryProbeSlot(t *testing.T) {
	hanging := newHangingServers(t)
	var log doneLog
	m := startMonitor(t, NewProber(10*time.Minute, 4, nil), clock.RealClock{}, Limits{Total: 4, PerNamespace: 2}, log.done)
	for i := range 8 {
		srv := hanging.start(t)
		nb := types.NamespacedName{Namespace: "a", Name: fmt.Sprintf("nb-%d", i)}
		m.Request(nb, run(nb.Name), Target{BaseURL: srv.URL + "/", Token: "t"})
	}
	testenv.Eventually(t, "namespace a's probes hang", func(context.Context) (bool, error) {
		return hanging.active.Load() == 2, nil
	})

	b := types.NamespacedName{Namespace: "b", Name: "nb"}
	m.Request(b, run("b"), Target{BaseURL: answering(t).URL + "/", Token: "t"})
	testenv.Eventually(t, "namespace b's probe answered", func(context.Context) (bool, error) {
		return log.count(b) == 1, nil
	})
	snap, ok := m.Latest(b, run("b"))
	if !ok || !snap.OK() || snap.Kernels != 1 {
		t.Fatalf("namespace b's snapshot: %+v, %v; want one idle kernel", snap, ok)
	}
	if n := hanging.most.Load(); n != 2 {
		t.Errorf("namespace a had %d probes in flight at once, want its limit of 2", n)
	}
}

// countingObserver answers each probe at once, or, while hold is open,
// once it is closed.
type countingObserver struct {
	hold   chan struct{}
	probes atomic.Int32
	answer Observation
}

func (c *countingObserver) Probe(ctx context.Context, _ Target) Observation {
	c.probes.Add(1)
	select {
	case <-c.hold:
	case <-ctx.Done():
		return Observation{Err: ctx.Err()}
	}
	return c.answer
}

// TestAFloodOfRequestsIsOneProbe: however often a notebook is asked
// about while its probe is in flight, one probe runs, and one answer is
// reported.
func TestAFloodOfRequestsIsOneProbe(t *testing.T) {
	o := &countingObserver{hold: make(chan struct{}), answer: Observation{Kernels: 2}}
	var log doneLog
	m := startMonitor(t, o, clock.RealClock{}, Limits{Total: 4, PerNamespace: 4}, log.done)
	nb := types.NamespacedName{Namespace: "a", Name: "nb"}
	for range 1000 {
		m.Request(nb, run("nb"), Target{})
	}
	close(o.hold)
	testenv.Eventually(t, "the probe answered", func(context.Context) (bool, error) {
		return log.count(nb) == 1, nil
	})
	m.mu.Lock()
	w := *m.notebooks[nb]
	m.mu.Unlock()
	if w.queued || w.probing || w.again {
		t.Errorf("after the only probe answered: %+v, want nothing queued or in flight", w)
	}
	if n := o.probes.Load(); n != 1 {
		t.Errorf("1000 requests ran %d probes, want 1", n)
	}
}

// TestSnapshotsBelongToOneRun: a snapshot of an earlier run of the
// server (another pod, another start, another Notebook of the same name)
// is never returned for the current one, and a forgotten notebook leaves
// nothing behind, even when its probe was in flight.
func TestSnapshotsBelongToOneRun(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	o := &countingObserver{hold: make(chan struct{}), answer: Observation{Kernels: 1}}
	close(o.hold)
	var log doneLog
	m := startMonitor(t, o, clk, Limits{Total: 4, PerNamespace: 4}, log.done)
	nb := types.NamespacedName{Namespace: "a", Name: "nb"}
	first := run("nb")
	m.Request(nb, first, Target{})
	testenv.Eventually(t, "the first run was probed", func(context.Context) (bool, error) {
		return log.count(nb) == 1, nil
	})
	snap, ok := m.Latest(nb, first)
	if !ok || !snap.At.Equal(clk.Now()) || snap.Run != first {
		t.Fatalf("snapshot of the first run: %+v, %v", snap, ok)
	}

	for name, next := range map[string]Run{
		"another pod":      {Notebook: first.Notebook, StartedAt: first.StartedAt, Pod: "other-pod"},
		"another start":    {Notebook: first.Notebook, StartedAt: "2026-01-01T10:00:00Z", Pod: first.Pod},
		"another Notebook": {Notebook: "other-uid", StartedAt: first.StartedAt, Pod: first.Pod},
	} {
		if _, ok := m.Latest(nb, next); ok {
			t.Errorf("%s: the first run's snapshot was returned", name)
		}
	}

	// Asking about a new run drops the old run's snapshot at once.
	hold := make(chan struct{})
	o.hold = hold
	second := Run{Notebook: first.Notebook, StartedAt: first.StartedAt, Pod: "second-pod"}
	m.Request(nb, second, Target{})
	if _, ok := m.Latest(nb, first); ok {
		t.Error("the first run's snapshot outlived a request for the second")
	}

	// Forgotten while its probe is in flight: the answer is dropped.
	m.Forget(nb)
	close(hold)
	testenv.Eventually(t, "the forgotten notebook's probe ended", func(context.Context) (bool, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.inFlight == 0, nil
	})
	m.mu.Lock()
	held := len(m.notebooks)
	m.mu.Unlock()
	if held != 0 || log.count(nb) != 1 {
		t.Errorf("after Forget: %d notebooks held, %d answers reported, want none held and no new answer", held, log.count(nb))
	}
}
