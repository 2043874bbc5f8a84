package jupyter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/culling"
	"github.com/ml-platform/ml-platform/operators/notebook/test/jupytertest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func target() Target { return Target{BaseURL: server.BaseURL, Token: server.Token} }

type serverStatus struct {
	LastActivity time.Time `json:"last_activity"`
}

func lastServerActivity(t *testing.T, s *jupytertest.Server) time.Time {
	t.Helper()
	var st serverStatus
	if err := s.Get(t.Context(), "api/status?no_track_activity=1", &st); err != nil {
		t.Fatal(err)
	}
	return st.LastActivity
}

// TestProbesDoNotCountAsActivity shows that polling with no_track_activity
// leaves the server's last_activity alone, while the same requests without
// it (what a naive prober does) move it: a prober that forgot the parameter
// would keep every notebook alive forever.
func TestProbesDoNotCountAsActivity(t *testing.T) {
	p := NewProber(5*time.Second, 4, nil)
	before := lastServerActivity(t, server)
	testenv.Consistently(t, "probes leave the server's last_activity alone", time.Second, func(ctx context.Context) error {
		if obs := p.Probe(ctx, target()); !obs.OK() {
			return fmt.Errorf("probe failed: %w", obs.Err)
		}
		if after := lastServerActivity(t, server); !after.Equal(before) {
			return fmt.Errorf("probing moved the server's last_activity from %v to %v", before, after)
		}
		return nil
	})

	// The control: an ordinary authenticated request does count.
	var kernels []any
	if err := server.Get(t.Context(), "api/kernels", &kernels); err != nil {
		t.Fatal(err)
	}
	if after := lastServerActivity(t, server); !after.After(before) {
		t.Fatalf("an untracked request left last_activity at %v; the check above proves nothing", after)
	}
}

// waitServerWatches waits until the Jupyter server follows the kernel's
// state. The server subscribes to the kernel's status messages with a ZeroMQ
// SUB socket when the kernel starts, and messages published before that
// subscription takes effect are lost to it (ZeroMQ's "slow joiner"): on a
// loaded machine a busy status sent right after the start is never seen,
// and the server reports the kernel as "starting" while a cell runs. Short
// cells are run until the server has seen one: its state is then "idle",
// and its last_activity, which the same subscription records, has moved
// past the cell (an "idle" set otherwise, before the subscription works,
// once let a later busy cell go unseen for 30 s).
func waitServerWatches(t *testing.T, kernelID string) {
	t.Helper()
	var kernel struct {
		ExecutionState string    `json:"execution_state"`
		LastActivity   time.Time `json:"last_activity"`
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := server.Get(t.Context(), "api/kernels/"+kernelID+"?no_track_activity=1", &kernel); err != nil {
			t.Fatal(err)
		}
		before := kernel.LastActivity
		exec, err := server.Execute(t.Context(), kernelID, "pass")
		if err != nil {
			t.Fatal(err)
		}
		if err := exec.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := server.Get(t.Context(), "api/kernels/"+kernelID+"?no_track_activity=1", &kernel); err != nil {
			t.Fatal(err)
		}
		if kernel.ExecutionState == "idle" && kernel.LastActivity.After(before) {
			return
		}
	}
	t.Fatal("the Jupyter server never saw the kernel's status messages")
}

func TestProbeReadsKernelAndTerminalActivity(t *testing.T) {
	ctx := t.Context()
	p := NewProber(5*time.Second, 4, nil)
	kernelID, err := server.StartKernel(ctx)
	if err != nil {
		t.Fatal(err)
	}

	waitServerWatches(t, kernelID)

	// A cell that runs until the test releases it makes the kernel busy
	// for as long as the test needs, however loaded the machine is.
	release := filepath.Join(server.Dir(), "release-"+kernelID)
	exec, err := server.Execute(ctx, kernelID, fmt.Sprintf("import os, time\nwhile not os.path.exists(%q):\n    time.sleep(0.02)", release))
	if err != nil {
		t.Fatal(err)
	}
	// The server learns of the busy state on its own iopub connection,
	// which may trail the message forwarded to us by a few milliseconds.
	var busy Observation
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if busy = p.Probe(ctx, target()); busy.Busy {
			break
		}
	}
	if !busy.OK() || !busy.Busy || busy.Kernels < 1 {
		t.Fatalf("probe during a running cell: %+v, want a busy kernel", busy)
	}
	// A busy kernel blocks culling even long after the last activity and
	// past an announced deadline.
	pol := config.Policy{IdleTimeout: 5 * time.Minute, CheckPeriod: time.Minute, WarningPeriod: time.Minute}
	later := time.Now().Add(24 * time.Hour)
	d := culling.Decide(culling.Input{
		Now: later, Policy: pol, StartedAt: time.Now().Add(-48 * time.Hour),
		Activity: culling.Activity{OK: true, Last: busy.LastActivity, Busy: busy.Busy},
		Warned:   later.Add(-time.Minute),
	})
	if d.Action != culling.None || !d.Deadline.IsZero() {
		t.Fatalf("decision for a busy kernel: %+v, want no cull and the warning withdrawn", d)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := exec.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	// As above, the server's own view of the kernel state may trail the
	// reply by a few milliseconds.
	var idle Observation
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if idle = p.Probe(ctx, target()); !idle.Busy {
			break
		}
	}
	if !idle.OK() || idle.Busy {
		t.Fatalf("probe after the cell finished: %+v, want idle", idle)
	}
	if !idle.LastActivity.After(busy.LastActivity) && !idle.LastActivity.Equal(busy.LastActivity) {
		t.Fatalf("kernel activity went back: %v then %v", busy.LastActivity, idle.LastActivity)
	}
	kernelActivity := idle.LastActivity

	// Typing in a terminal is activity too, later than the kernel's.
	time.Sleep(50 * time.Millisecond)
	term, err := server.StartTerminal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.TypeInTerminal(ctx, term, "echo probe-test"); err != nil {
		t.Fatal(err)
	}
	withTerm := p.Probe(ctx, target())
	if !withTerm.OK() || !withTerm.TerminalsAvailable || withTerm.Terminals < 1 {
		t.Fatalf("probe with a terminal: %+v", withTerm)
	}
	if !withTerm.LastActivity.After(kernelActivity) {
		t.Fatalf("terminal activity not seen: last activity %v, kernel's %v", withTerm.LastActivity, kernelActivity)
	}

	// Probing again changes nothing: the probes are not activity.
	testenv.Consistently(t, "probes leave kernel and terminal activity alone", time.Second, func(ctx context.Context) error {
		if again := p.Probe(ctx, target()); !again.LastActivity.Equal(withTerm.LastActivity) {
			return fmt.Errorf("probing moved kernel or terminal activity from %v to %v", withTerm.LastActivity, again.LastActivity)
		}
		return nil
	})
}

func TestProbeWithWrongTokenFails(t *testing.T) {
	p := NewProber(5*time.Second, 1, nil)
	obs := p.Probe(t.Context(), Target{BaseURL: server.BaseURL, Token: "wrong"})
	var he *HTTPError
	if obs.OK() || !errors.As(obs.Err, &he) || he.Code != http.StatusForbidden {
		t.Fatalf("probe with a wrong token: %+v, want HTTP 403", obs)
	}
}

func TestServerWithoutTerminals(t *testing.T) {
	// A server without terminals answers 404 on /api/terminals: that is
	// no terminal activity, not a failed probe. A stand-in answers like it
	// rather than a second real server, which would double this package's
	// start-up time.
	noTerms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/status":
			_, _ = w.Write([]byte(`{"connections": 0, "kernels": 1, "last_activity": "2026-01-01T10:00:00Z", "started": "2026-01-01T09:00:00Z"}`))
		case "/api/kernels":
			_, _ = w.Write([]byte(`[{"id": "k", "execution_state": "idle", "last_activity": "2026-01-01T10:00:00.123456Z"}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer noTerms.Close()
	obs := NewProber(time.Second, 1, nil).Probe(t.Context(), Target{BaseURL: noTerms.URL + "/", Token: "x"})
	want := time.Date(2026, 1, 1, 10, 0, 0, 123456000, time.UTC)
	if !obs.OK() || obs.TerminalsAvailable || !obs.LastActivity.Equal(want) {
		t.Fatalf("probe of a server without terminals: %+v", obs)
	}
}

// TestProbeCountsAKernelNotKnownIdleAsInUse: only a kernel Jupyter reports
// idle or dead may be culled on its last activity. One still "starting"
// long after its start is what Jupyter Server reports when its own
// connection to the kernel missed every status message, while a cell may
// run; "restarting" is a kernel on its way back. A stand-in server answers
// with each state, as a real kernel cannot be held in them.
func TestProbeCountsAKernelNotKnownIdleAsInUse(t *testing.T) {
	for _, c := range []struct {
		states []string
		inUse  bool
	}{
		{[]string{"idle"}, false},
		{[]string{"dead"}, false},
		{[]string{""}, false},
		{[]string{"idle", "dead"}, false},
		{[]string{"busy"}, true},
		{[]string{"starting"}, true},
		{[]string{"restarting"}, true},
		{[]string{"idle", "starting"}, true},
		{[]string{"a-state-of-a-newer-jupyter"}, true},
	} {
		kernels := "["
		for i, state := range c.states {
			if i > 0 {
				kernels += ","
			}
			kernels += fmt.Sprintf(`{"id": "k%d", "execution_state": %q, "last_activity": "2026-01-01T10:00:00Z"}`, i, state)
		}
		kernels += "]"
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/api/status":
				_, _ = w.Write([]byte(`{"connections": 0}`))
			case "/api/kernels":
				_, _ = w.Write([]byte(kernels))
			default:
				http.NotFound(w, r)
			}
		}))
		obs := NewProber(time.Second, 1, nil).Probe(t.Context(), Target{BaseURL: srv.URL + "/", Token: "x"})
		srv.Close()
		if !obs.OK() || obs.Busy != c.inUse || obs.Kernels != len(c.states) {
			t.Errorf("kernels %q: probe %+v, want in use %v", c.states, obs, c.inUse)
		}
	}
}

// countingTransport records how many requests the prober has in flight at
// most. It counts on the client side: a server handler can outlive the
// request its client already gave up on, and counting there would charge
// the prober for the server's lag.
type countingTransport struct {
	base           http.RoundTripper
	inFlight, most atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			break
		}
	}
	return c.base.RoundTrip(r)
}

func TestProbeTimesOutAndBoundsConcurrency(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)

	transport := &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	p := NewProber(300*time.Millisecond, 2, transport)
	var wg sync.WaitGroup
	results := make([]Observation, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = p.Probe(context.Background(), Target{BaseURL: slow.URL + "/", Token: "x"})
		}()
	}
	wg.Wait()
	for i, obs := range results {
		if obs.OK() {
			t.Errorf("probe %d of a hanging server succeeded", i)
		}
		if reason := failureReason(obs.Err); reason != "timeout" && reason != "throttled" {
			t.Errorf("probe %d failed with %v (%s), want a timeout or throttling", i, obs.Err, reason)
		}
	}
	if m := transport.most.Load(); m > 2 || m < 1 {
		t.Errorf("%d probes were in flight at once, want 1 or 2", m)
	}
}

// TestProbeDoesNotFollowRedirects: the Jupyter server is the tenant's, and
// a redirect from it would send the operator, from inside the cluster and
// past the tenant's NetworkPolicies, to any address it names, and take a
// valid answer there as the notebook's. A redirect is a failed probe.
func TestProbeDoesNotFollowRedirects(t *testing.T) {
	var hit atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit.Add(1)
		switch r.URL.Path {
		case "/api/kernels", "/api/terminals":
			_, _ = w.Write([]byte(`[]`))
		default:
			_, _ = w.Write([]byte(`{"connections": 0}`))
		}
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	defer redirecting.Close()

	obs := NewProber(5*time.Second, 1, nil).Probe(t.Context(), Target{BaseURL: redirecting.URL + "/", Token: "x"})
	var he *HTTPError
	if obs.OK() || !errors.As(obs.Err, &he) || he.Code != http.StatusFound || !strings.Contains(obs.Err.Error(), "redirect") {
		t.Errorf("probe of a server that redirects: %+v, want a failure that says HTTP 302 is a redirect", obs)
	}
	if n := hit.Load(); n != 0 {
		t.Errorf("the redirect's target was requested %d times", n)
	}
}
