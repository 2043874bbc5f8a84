package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/ml-platform/ml-platform/shared/metrics"
)

// NoTrackActivity is the query parameter that stops Jupyter from counting a
// request as user activity. Without it every probe would refresh the
// server's last_activity and nothing would ever be culled.
const NoTrackActivity = "no_track_activity=1"

var (
	probeDuration = metrics.NewHistogramVec("notebook", "probe_duration_seconds",
		"Duration of one activity probe of a Jupyter server (three REST calls).", nil, "result")
	probeFailures = metrics.NewCounterVec("notebook", "probe_failures_total",
		"Activity probes that failed, by reason (timeout, http_<code>, error, throttled).", "reason")
)

// Target is one Jupyter server.
type Target struct {
	// BaseURL ends with the server's base URL, e.g.
	// http://nb.team.svc.cluster.local/notebook/team/nb/.
	BaseURL string
	// Token authenticates as the server's user.
	Token string
}

// Observation is what a probe saw.
type Observation struct {
	// Err is set when the probe failed; the other fields are then zero.
	Err error
	// LastActivity is the latest kernel or terminal activity.
	LastActivity time.Time
	// Busy is true while any kernel executes code, or Jupyter cannot say
	// it does not (see inUse).
	Busy bool
	// Kernels and Terminals count the running ones; Connections counts
	// open kernel websocket connections (browser tabs with a notebook open).
	Kernels, Terminals, Connections int
	// TerminalsAvailable is false when the server does not serve terminals
	// (no terminado): its /api/terminals answers 404.
	TerminalsAvailable bool
}

// OK reports whether the probe succeeded.
func (o Observation) OK() bool { return o.Err == nil }

// Prober probes Jupyter servers with a bounded number of probes in flight
// and a timeout per probe.
type Prober struct {
	client  *http.Client
	timeout time.Duration
	slots   chan struct{}
}

// NewProber returns a Prober; a nil transport means a dedicated transport
// that keeps a few idle connections per notebook.
func NewProber(timeout time.Duration, concurrency int, transport http.RoundTripper) *Prober {
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 2
		t.MaxIdleConns = max(100, concurrency*2)
		transport = t
	}
	return &Prober{
		client: &http.Client{
			Transport: transport,
			Timeout:   timeout,
			// The server is the tenant's: a redirect it answers could send
			// the operator to any address the operator's pod reaches, past
			// the tenant's NetworkPolicies, and a valid answer there would
			// pass for the notebook's. A redirect is a failed probe.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		timeout: timeout,
		slots:   make(chan struct{}, max(concurrency, 1)),
	}
}

// ErrThrottled is returned when no probe slot freed up within the timeout.
var ErrThrottled = errors.New("too many probes in flight")

// Probe reads /api/status, /api/kernels and /api/terminals. Any failure is
// reported in Observation.Err and must never be taken as inactivity.
func (p *Prober) Probe(ctx context.Context, t Target) Observation {
	wait, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	select {
	case p.slots <- struct{}{}:
	case <-wait.Done():
		probeFailures.WithLabelValues("throttled").Inc()
		return Observation{Err: ErrThrottled}
	}
	defer func() { <-p.slots }()

	start := time.Now()
	ctx, cancel = context.WithTimeout(ctx, p.timeout)
	defer cancel()
	obs := p.probe(ctx, t)
	result := "ok"
	if obs.Err != nil {
		result = "error"
		probeFailures.WithLabelValues(failureReason(obs.Err)).Inc()
	}
	probeDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return obs
}

type status struct {
	Connections int `json:"connections"`
}

type kernel struct {
	LastActivity   time.Time `json:"last_activity"`
	ExecutionState string    `json:"execution_state"`
}

type terminal struct {
	LastActivity time.Time `json:"last_activity"`
}

func (p *Prober) probe(ctx context.Context, t Target) Observation {
	var (
		obs       Observation
		st        status
		kernels   []kernel
		terminals []terminal
	)
	// /api/status first: it proves the server answers and the token works.
	if err := p.get(ctx, t, "api/status", &st); err != nil {
		return Observation{Err: err}
	}
	if err := p.get(ctx, t, "api/kernels", &kernels); err != nil {
		return Observation{Err: err}
	}
	err := p.get(ctx, t, "api/terminals", &terminals)
	var he *HTTPError
	switch {
	case errors.As(err, &he) && he.Code == http.StatusNotFound:
		// A server without terminado has no terminals to be active in.
	case err != nil:
		return Observation{Err: err}
	default:
		obs.TerminalsAvailable = true
	}

	obs.Connections = st.Connections
	obs.Kernels = len(kernels)
	obs.Terminals = len(terminals)
	for _, k := range kernels {
		if inUse(k.ExecutionState) {
			obs.Busy = true
		}
		if k.LastActivity.After(obs.LastActivity) {
			obs.LastActivity = k.LastActivity
		}
	}
	for _, term := range terminals {
		if term.LastActivity.After(obs.LastActivity) {
			obs.LastActivity = term.LastActivity
		}
	}
	return obs
}

// inUse reports whether a kernel in this execution state may be running
// a cell, so that its old last activity must not cull the notebook: only
// "idle" and "dead" say it is not. Jupyter Server takes the state from the
// kernel's status messages on its own iopub connection and sets "starting"
// before the first one. If that connection misses them, as one kernel's did
// on a loaded kind node (Jupyter Server 1.23, the e2e suite, 2026-11-29),
// the state stays "starting" and the last activity stays at the kernel's
// start while a long cell runs: culling on it would throw that work away.
// A server that says no state at all has nothing to go by but activity.
// maxLifetime still bounds a notebook whose kernel never leaves "starting".
func inUse(executionState string) bool {
	switch executionState {
	case "idle", "dead", "":
		return false
	}
	return true
}

// HTTPError is a non-200 answer.
type HTTPError struct {
	Path string
	Code int
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("GET %s: HTTP %d", e.Path, e.Code)
	if e.Code >= 300 && e.Code < 400 {
		msg += " (a redirect, which probes do not follow)"
	}
	return msg
}

func (p *Prober) get(ctx context.Context, t Target, path string, into any) error {
	url := strings.TrimSuffix(t.BaseURL, "/") + "/" + path + "?" + NoTrackActivity
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+t.Token)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return &HTTPError{Path: path, Code: resp.StatusCode}
	}
	// A Jupyter answer is small; a huge one is not Jupyter.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(into); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

func failureReason(err error) string {
	var (
		he     *HTTPError
		netErr net.Error
	)
	switch {
	case errors.Is(err, ErrThrottled):
		return "throttled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.As(err, &he):
		return fmt.Sprintf("http_%d", he.Code)
	default:
		return "error"
	}
}
