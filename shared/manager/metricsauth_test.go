package manager

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
)

// tokenReviewCounter counts the TokenReviews made through a REST config.
type tokenReviewCounter struct{ n atomic.Int64 }

func (c *tokenReviewCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tokenreviews") {
				c.n.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// clientFrom is an HTTP client whose connections come from the loopback
// address local, so a test can be several sources.
func clientFrom(local string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		MaxIdleConnsPerHost: 8,
	}}
}

// statusOf is the status of a GET of url with token; 0 when it failed.
func statusOf(c *http.Client, url, token string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func randomToken(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestGarbageTokensCostAtMostTheMetricsBudget: anyone the metrics
// NetworkPolicy admits can send tokens. 500 distinct garbage tokens from
// five addresses cost at most the budget's TokenReviews, the rest get 429
// with no review, and a scraper whose token is known is served throughout.
func TestGarbageTokensCostAtMostTheMetricsBudget(t *testing.T) {
	cs := adminClientset(t)
	ns := createNamespace(t, cs, "metrics-flood")
	scraperToken := serviceAccountToken(t, cs, ns, "scraper")
	allowMetricsGet(t, cs, ns, "scraper")

	var reviews tokenReviewCounter
	cfg := testConfig(t)
	cfg.RESTConfig = reviews.wrap(env.Config)
	cfg.MetricsSecure = true
	cfg.MetricsBindAddress = freeAddr(t)
	auth := &cfg.MetricsAuth
	auth.Reviews.Rate, auth.Reviews.Burst, auth.Reviews.CacheTTL = 1, 20, time.Hour
	auth.SourceRate, auth.SourceBurst = 0.5, 8
	mgr, err := New(cfg, Options{Name: "metrics-flood-test-operator", Setup: setupWithMetric})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	url := "https://" + cfg.MetricsBindAddress + "/metrics"
	scraper := clientFrom("127.0.0.1")
	waitServing(t, scraper, url)
	if status, _ := get(t, scraper, url, scraperToken); status != http.StatusOK {
		t.Fatalf("the scraper is not served before the flood: %d", status)
	}
	before := reviews.n.Load()

	began := time.Now()
	const sources, perSource = 5, 100
	var mu sync.Mutex
	codes := map[int]int{}
	var flood sync.WaitGroup
	for i := range sources {
		c := clientFrom(fmt.Sprintf("127.0.0.%d", i+1))
		flood.Go(func() {
			for range perSource {
				status := statusOf(c, url, randomToken(t))
				mu.Lock()
				codes[status]++
				mu.Unlock()
			}
		})
	}
	// The scraper, from an address that also floods, is served meanwhile.
	for range 10 {
		if status, body := get(t, scraper, url, scraperToken); status != http.StatusOK || !strings.Contains(body, testMetric) {
			t.Errorf("the scraper was answered %d during the flood", status)
		}
	}
	flood.Wait()
	elapsed := time.Since(began)

	made := reviews.n.Load() - before
	// The endpoint's bucket: its burst, and its rate for as long as the
	// flood lasted (plus one for the moment the clock was read).
	budget := int64(auth.Reviews.Burst) + int64(auth.Reviews.Rate*elapsed.Seconds()) + 1
	if made > budget {
		t.Errorf("%d TokenReviews for %d garbage tokens in %s, budget %d", made, sources*perSource, elapsed, budget)
	}
	if codes[http.StatusTooManyRequests] < sources*perSource-int(budget) || codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != sources*perSource {
		t.Errorf("answers to garbage tokens: %v; want 401 for each reviewed one and 429 for the rest", codes)
	}
}

// TestAuthErrorsAreLoggedOncePerInterval: a caller who can make reviews
// fail cannot flood the log.
func TestAuthErrorsAreLoggedOncePerInterval(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	s := &sampledErrors{log: log, interval: time.Hour}
	for range 100 {
		s.report(errors.New("the API server is overloaded"), "Authenticating a metrics request failed")
	}
	if len(lines) != 1 {
		t.Errorf("%d error lines for 100 failures within the interval, want 1", len(lines))
	}
	s.written = time.Now().Add(-2 * time.Hour)
	s.report(errors.New("still overloaded"), "Authenticating a metrics request failed")
	if len(lines) != 2 || !strings.Contains(lines[1], `"sameErrorsNotLogged"=99`) {
		t.Errorf("the next line does not count the 99 left out: %q", lines)
	}
}
