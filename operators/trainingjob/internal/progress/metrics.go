package progress

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ml-platform/ml-platform/shared/metrics"
)

// subsystem makes every series mlplatform_trainingjob_progress_*, next to
// the operator's other mlplatform_trainingjob_* series.
const subsystem = "trainingjob"

// endpointMetrics count what the endpoint answers and what authenticating
// its callers costs. A nil *endpointMetrics counts nothing.
type endpointMetrics struct {
	requests   *prometheus.CounterVec
	reviews    *prometheus.CounterVec
	cacheHits  *prometheus.CounterVec
	throttles  *prometheus.CounterVec
	connErrors *prometheus.CounterVec
}

// newEndpointMetrics registers the endpoint's metrics. It runs from Setup
// rather than at package init, so a process that never serves the
// endpoint (the controller's tests) defines none of them.
func newEndpointMetrics() *endpointMetrics {
	m := &endpointMetrics{
		requests: metrics.NewCounterVec(subsystem, "progress_requests_total",
			"Requests to the training progress endpoint, by the HTTP status code answered.", "code"),
		reviews: metrics.NewCounterVec(subsystem, "progress_tokenreviews_total",
			"TokenReviews the progress endpoint made, by result: authenticated, refused (not a pod-bound token of the endpoint's audience) or error (the API server did not answer).", "result"),
		cacheHits: metrics.NewCounterVec(subsystem, "progress_token_cache_hits_total",
			"Progress requests whose token was authenticated (or refused) from the cache of earlier TokenReviews, without a new one.", "result"),
		throttles: metrics.NewCounterVec(subsystem, "progress_throttled_total",
			"Progress requests refused by a limit: source (the caller's address, before authentication), tokenreview (the endpoint's budget of TokenReviews) or trainingjob (the job's reports).", "limit"),
		connErrors: metrics.NewCounterVec(subsystem, "progress_connection_errors_total",
			"Connections to the progress endpoint that failed before a request, such as TLS handshakes that failed or timed out."),
	}
	return m
}

func (m *endpointMetrics) answered(code int) {
	if m != nil {
		m.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	}
}

func (m *endpointMetrics) reviewed(result string) {
	if m != nil {
		m.reviews.WithLabelValues(result).Inc()
	}
}

func (m *endpointMetrics) cacheHit(authenticated bool) {
	if m == nil {
		return
	}
	result := "refused"
	if authenticated {
		result = "authenticated"
	}
	m.cacheHits.WithLabelValues(result).Inc()
}

func (m *endpointMetrics) throttled(limit string) {
	if m != nil {
		m.throttles.WithLabelValues(limit).Inc()
	}
}

func (m *endpointMetrics) connectionErrors(n int) {
	if m != nil {
		m.connErrors.WithLabelValues().Add(float64(n))
	}
}

// counted wraps next so every answer is counted by its status code.
func (m *endpointMetrics) counted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		m.answered(rec.code)
	})
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
