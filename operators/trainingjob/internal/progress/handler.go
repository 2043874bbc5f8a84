package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ml-platform/ml-platform/shared/tokenbudget"
)

// ReportPath is the endpoint's route; {namespace} and {name} name the
// TrainingJob.
const ReportPath = "/v1/namespaces/{namespace}/trainingjobs/{name}/progress"

// headerForwarded marks a report a non-leader replica passed on, so the
// receiver never passes it on again.
const headerForwarded = "X-Mlplatform-Forwarded"

// Handler serves ReportPath. The cheap checks come first, on every
// replica: the caller's source address is rate-limited, the body's size
// bounded, the token's presence and the report's syntax checked. Then the
// leader authorizes (a TokenReview, cached), rate-limits per TrainingJob
// and records the report; a standby passes the request on to the leader
// unchanged, whose answer the caller gets.
type Handler struct {
	Auth   *Authorizer
	Writer *Writer
	// Limits are each TrainingJob's buckets of reports.
	Limits *tokenbudget.Limiter[types.UID]
	// Sources are each source address's buckets of requests, taken
	// before anything else.
	Sources *tokenbudget.Limiter[string]
	// FromReplica says whether a request was passed on by another replica
	// of the operator, which limited its source already.
	FromReplica func(r *http.Request) bool
	Leading     func() bool
	Forward     func(ctx context.Context, r *http.Request, body []byte) (*http.Response, error)
	Log         logr.Logger
	Metrics     *endpointMetrics
}

// Mux routes the endpoint and counts its answers.
func (h *Handler) Mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ReportPath, h.serveReport)
	mux.HandleFunc(ReportPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: POST "+ReportPath)
	})
	return h.Metrics.counted(mux)
}

func (h *Handler) serveReport(w http.ResponseWriter, r *http.Request) {
	job := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if !h.fromReplica(r) {
		if ok, wait := h.Sources.Allow(tokenbudget.Source(r)); !ok {
			h.Metrics.throttled("source")
			tooMany(w, wait, "too many requests from this address; retry after the Retry-After seconds")
			return
		}
	}
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	token, ok := bearer(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "missing bearer token: send the projected ServiceAccount token as Authorization: Bearer <token>")
		return
	}
	rep, err := Decode(bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !h.Leading() {
		h.forward(w, r, body)
		return
	}
	caller, err := h.Auth.Authorize(r.Context(), token, job)
	if err != nil {
		h.refuse(w, job, err)
		return
	}
	if ok, wait := h.Limits.Allow(caller.Job); !ok {
		h.Metrics.throttled("trainingjob")
		tooMany(w, wait, "too many reports for this TrainingJob; retry after the Retry-After seconds")
		return
	}
	h.Writer.Put(job, caller.Job, rep)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"status":"accepted"}` + "\n"))
}

func (h *Handler) fromReplica(r *http.Request) bool {
	return h.FromReplica != nil && h.FromReplica(r)
}

func tooMany(w http.ResponseWriter, wait time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(tokenbudget.RetryAfter(wait)))
	writeError(w, http.StatusTooManyRequests, msg)
}

// refuse answers an authorization failure. Only errors of the API server
// are logged: a refused token is the caller's business, and the token
// itself is never logged.
func (h *Handler) refuse(w http.ResponseWriter, job types.NamespacedName, err error) {
	var ae *authError
	if errors.As(err, &ae) {
		if ae.retry > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(tokenbudget.RetryAfter(ae.retry)))
		}
		writeError(w, ae.status, ae.msg)
		return
	}
	h.Log.Error(err, "Authorizing a progress report failed", "trainingJob", job)
	w.Header().Set("Retry-After", "5")
	writeError(w, http.StatusServiceUnavailable, "cannot check the token now; retry later")
}

// forward passes the request on to the leader. A request that was
// forwarded already is refused instead: this replica stopped leading in
// between, and the caller retries.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Header.Get(headerForwarded) != "" || h.Forward == nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "no operator replica leads right now; retry later")
		return
	}
	resp, err := h.Forward(r.Context(), r, body)
	if err != nil {
		h.Log.Info("Passing a progress report to the leader failed", "error", err.Error())
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "cannot reach the leading operator replica; retry later")
		return
	}
	defer func() { _ = resp.Body.Close() }()
	for _, k := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	out, _ := readAtMost(resp.Body, MaxBodyBytes)
	_, _ = w.Write(out)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readAtMost(http.MaxBytesReader(w, r.Body, MaxBodyBytes), MaxBodyBytes+1)
	if err != nil {
		return nil, fmt.Errorf("the body must be at most %d bytes", MaxBodyBytes)
	}
	return body, nil
}

func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// errorBody is every refusal's JSON body.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorBody{Code: code, Message: msg})
}
