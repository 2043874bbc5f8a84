package jupyter

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
)

// assertedMetrics: the probe metrics and the test that asserts each (the
// Notebook controller's guard points here too).
var assertedMetrics = map[string]string{
	"mlplatform_notebook_probe_duration_seconds": "TestProbeMetrics",
	"mlplatform_notebook_probe_failures_total":   "TestProbeMetrics",
}

func TestEveryProbeMetricIsAsserted(t *testing.T) {
	metricstest.RequireAsserted(t, assertedMetrics, []string{"mlplatform_notebook_probe_"})
}

// TestProbeMetrics probes the real Jupyter server successfully, with a
// wrong token, and while the only slot is taken, and checks each outcome
// in the probe metrics. The package's tests run one after another, so the
// differences are this test's alone.
func TestProbeMetrics(t *testing.T) {
	duration := func(result string) uint64 {
		n, _ := metricstest.Histogram(t, "mlplatform_notebook_probe_duration_seconds", map[string]string{"result": result})
		return n
	}
	failures := func(reason string) float64 {
		return metricstest.Value(t, "mlplatform_notebook_probe_failures_total", map[string]string{"reason": reason})
	}
	okBefore, errBefore := duration("ok"), duration("error")
	forbiddenBefore, throttledBefore := failures("http_403"), failures("throttled")

	p := NewProber(5*time.Second, 1, nil)
	if obs := p.Probe(t.Context(), target()); !obs.OK() {
		t.Fatalf("probe: %v", obs.Err)
	}
	if obs := p.Probe(t.Context(), Target{BaseURL: server.BaseURL, Token: "wrong"}); obs.OK() {
		t.Fatal("a probe with a wrong token succeeded")
	}
	if d := duration("ok") - okBefore; d != 1 {
		t.Errorf("probe_duration_seconds{result=ok} grew by %d, want 1", d)
	}
	if d := duration("error") - errBefore; d != 1 {
		t.Errorf("probe_duration_seconds{result=error} grew by %d, want 1", d)
	}
	if d := failures("http_403") - forbiddenBefore; d != 1 {
		t.Errorf("probe_failures_total{reason=http_403} grew by %v, want 1", d)
	}

	// One slot, held by a probe of a server that never answers: the next
	// probe gives up waiting for the slot and is counted as throttled,
	// without a duration.
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hanging.Close()
	defer close(release)
	slow := NewProber(time.Minute, 1, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go slow.Probe(ctx, Target{BaseURL: hanging.URL + "/", Token: "x"})
	for len(slow.slots) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	waiting, stop := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer stop()
	if obs := slow.Probe(waiting, target()); !errors.Is(obs.Err, ErrThrottled) {
		t.Fatalf("probe while the only slot is taken: %v, want ErrThrottled", obs.Err)
	}
	if d := failures("throttled") - throttledBefore; d != 1 {
		t.Errorf("probe_failures_total{reason=throttled} grew by %v, want 1", d)
	}
}
