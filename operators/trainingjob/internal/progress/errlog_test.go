package progress

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
)

// assertedMetrics names, for each metric of the endpoint, the test that
// drives it and asserts its value.
var assertedMetrics = map[string]string{
	"mlplatform_trainingjob_progress_requests_total":          "TestFloodsCostBoundedTokenReviews",
	"mlplatform_trainingjob_progress_tokenreviews_total":      "TestGarbageTokensCostAtMostTheReviewBudget",
	"mlplatform_trainingjob_progress_token_cache_hits_total":  "TestValidTokenFloodCostsOneReview",
	"mlplatform_trainingjob_progress_throttled_total":         "TestGarbageTokensCostAtMostTheReviewBudget",
	"mlplatform_trainingjob_progress_connection_errors_total": "TestConnectionErrorsAreLoggedAtMostOncePerInterval",
}

// TestEveryMetricIsAsserted is the guard: every metric of the endpoint
// is listed in assertedMetrics under a test that names it.
func TestEveryMetricIsAsserted(t *testing.T) {
	newEndpointMetrics()
	metricstest.RequireAsserted(t, assertedMetrics, []string{"mlplatform_trainingjob_progress_"})
}

// logLines records what a logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// TestConnectionErrorsAreLoggedAtMostOncePerInterval: a thousand failed
// handshakes, as the http.Server reports them to its ErrorLog, become one
// structured line at once and one more with the rest of the count when
// the interval has passed; every one is counted in the metric.
func TestConnectionErrorsAreLoggedAtMostOncePerInterval(t *testing.T) {
	const connErrors = "mlplatform_trainingjob_progress_connection_errors_total"
	before := metricstest.Value(t, connErrors, nil)
	var out logLines
	clock := newFakeClock()
	c := &connectionErrors{
		log:      funcr.New(out.add, funcr.Options{}),
		interval: time.Minute, metrics: newEndpointMetrics(), now: clock.Now,
	}
	server := c.logger()
	for range 1000 {
		server.Printf("http: TLS handshake error from 10.0.0.7:41234: EOF")
	}
	clock.Step(30 * time.Second)
	c.flush(false)
	if got := out.all(); len(got) != 1 || !strings.Contains(got[0], `"count"=1 `) {
		t.Fatalf("after 1000 errors within the interval the log has %d lines (the first %q), want one line with count 1", len(got), got[0])
	}
	clock.Step(30 * time.Second)
	c.flush(false)
	got := out.all()
	if len(got) != 2 || !strings.Contains(got[1], `"count"=999 `) || !strings.Contains(got[1], `"latest"="http: TLS handshake error from 10.0.0.7:41234: EOF"`) {
		t.Errorf("after the interval the log has %q, want a second line with count 999 and the latest error", got)
	}
	if d := metricstest.Value(t, connErrors, nil) - before; d != 1000 {
		t.Errorf("%s rose by %v, want 1000", connErrors, d)
	}

	// A stopping server writes what it still counted.
	server.Printf("http: TLS handshake error from 10.0.0.8:1: EOF")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c.run(ctx)
	if got := out.all(); len(got) != 3 || !strings.Contains(got[2], `"count"=1 `) {
		t.Errorf("after stopping the log has %q, want a third line with count 1", got)
	}
}
