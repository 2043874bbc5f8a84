package progress

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
	"github.com/ml-platform/ml-platform/shared/tokenbudget"
)

// newFakeClock is a clock tests move by hand (Step).
func newFakeClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
}

// countingReviewer answers TokenReviews as the API server would for the
// tokens it knows, and counts every review.
type countingReviewer struct {
	calls atomic.Int64
	// pods maps a valid token to the pod it is bound to.
	pods map[string]boundPod
	// holdFor, when set, holds each review until that many reviews run at
	// once or holdMax passed, as a slow API server would.
	holdFor int64
	holdMax time.Duration
}

func (r *countingReviewer) review(_ context.Context, token string) (authenticationv1.TokenReviewStatus, error) {
	n := r.calls.Add(1)
	if r.holdFor > 0 {
		deadline := time.Now().Add(r.holdMax)
		for n < r.holdFor && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			n = r.calls.Load()
		}
	}
	pod, ok := r.pods[token]
	if !ok {
		return authenticationv1.TokenReviewStatus{Authenticated: false}, nil
	}
	return authenticationv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     []string{Audience},
		User: authenticationv1.UserInfo{
			Username: "system:serviceaccount:" + pod.Namespace + ":trainer",
			Extra: map[string]authenticationv1.ExtraValue{
				extraPodName: {pod.Name}, extraPodUID: {string(pod.UID)},
			},
		},
	}, nil
}

// jwt is a token shaped like a ServiceAccount token that expires at exp;
// only the endpoint's cache reads its claims.
func jwt(id string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"exp":%d,"jti":%q}`, exp.Unix(), id))) + ".c2ln"
}

// guarded is a Handler on a fake cluster with one TrainingJob "train" in
// namespace "team", its Job, and its rank 0 pod, whose token is token.
type guarded struct {
	h        *Handler
	clock    *clocktesting.FakeClock
	reviewer *countingReviewer
	token    string
	// fromReplica marks every request as passed on by a replica.
	fromReplica bool
	metrics     *endpointMetrics
}

// counter reads a series of the endpoint's metrics, which every test of
// this process shares: tests compare differences.
func counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	return metricstest.Value(t, name, map[string]string{label: value})
}

func newGuarded(t *testing.T, o Options) *guarded {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainingv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: "tj-uid"}}
	ref := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train-r1", UID: "job-uid",
		OwnerReferences: ref(trainingv1alpha1.GroupVersion.String(), "TrainingJob", "train", "tj-uid")}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train-r1-0", UID: "pod-uid",
		Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: "0"},
		OwnerReferences: ref("batch/v1", "Job", "train-r1", "job-uid")}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tj, job, pod).Build()

	g := &guarded{clock: newFakeClock(), reviewer: &countingReviewer{pods: map[string]boundPod{}}, metrics: newEndpointMetrics()}
	g.token = jwt("rank0", g.clock.Now().Add(time.Hour))
	g.reviewer.pods[g.token] = boundPod{Namespace: "team", Name: "train-r1-0", UID: "pod-uid"}
	g.h = &Handler{
		Auth: &Authorizer{
			Reviews: newTokenReviews(g.reviewer.review, o.Reviews, g.clock.Now, g.metrics),
			Reader:  reader, Scheme: scheme,
		},
		Writer:      &Writer{Now: g.clock.Now},
		Limits:      tokenbudget.NewLimiter[types.UID](o.Rate, o.Burst, maxJobs, g.clock.Now),
		Sources:     tokenbudget.NewLimiter[string](o.SourceRate, o.SourceBurst, o.MaxSources, g.clock.Now),
		FromReplica: func(*http.Request) bool { return g.fromReplica },
		Leading:     func() bool { return true },
		Log:         logr.Discard(),
		Metrics:     g.metrics,
	}
	return g
}

// generous are options whose per-source and per-job limits stay out of
// the way, so a test sees the layer it is about.
func generous() Options {
	o := DefaultOptions()
	o.Rate, o.Burst = 1e6, 1e6
	o.SourceRate, o.SourceBurst = 1e6, 1e6
	o.Reviews.Rate, o.Reviews.Burst = 1e6, 1e6
	return o
}

// post sends a report from source with token ("" for none) to the job
// "train" of namespace ns and returns the answer.
func (g *guarded) post(ns, source, token, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/namespaces/"+ns+"/trainingjobs/train/progress", strings.NewReader(body))
	req.RemoteAddr = source + ":40000"
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	g.h.Mux().ServeHTTP(rec, req)
	return rec
}

// reports is how many reports the Writer holds.
func (g *guarded) reports() int {
	g.h.Writer.mu.Lock()
	defer g.h.Writer.mu.Unlock()
	return len(g.h.Writer.entries)
}

// codes counts answers by status code.
type codes map[int]int

func (c codes) String() string { return fmt.Sprint(map[int]int(c)) }

// TestGarbageTokensCostAtMostTheReviewBudget: a flood of distinct garbage
// tokens costs no more TokenReviews than the budget's burst (the clock
// stands still, so nothing refills); the rest are refused at once with
// 429 and Retry-After. From one source, the source's bucket stops the
// flood before it costs even that.
func TestGarbageTokensCostAtMostTheReviewBudget(t *testing.T) {
	const throttled, reviews = "mlplatform_trainingjob_progress_throttled_total", "mlplatform_trainingjob_progress_tokenreviews_total"
	budgetBefore, refusedBefore := counter(t, throttled, "limit", "tokenreview"), counter(t, reviews, "result", "refused")
	o := generous()
	o.Reviews.Rate, o.Reviews.Burst = 5, 20
	g := newGuarded(t, o)
	got := codes{}
	for i := range 500 {
		rec := g.post("team", fmt.Sprintf("10.0.%d.%d", i/250, i%250), fmt.Sprintf("garbage-%d", i), `{"step":1}`)
		got[rec.Code]++
		if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %s", rec.Body)
		}
	}
	if n := g.reviewer.calls.Load(); n != 20 {
		t.Errorf("500 garbage tokens from 500 sources cost %d TokenReviews, want the budget's burst of 20", n)
	}
	if got[401] != 20 || got[429] != 480 {
		t.Errorf("answers %v, want 20 x 401 and 480 x 429", got)
	}
	if d := counter(t, throttled, "limit", "tokenreview") - budgetBefore; d != 480 {
		t.Errorf("throttled_total{limit=tokenreview} rose by %v, want 480", d)
	}
	if d := counter(t, reviews, "result", "refused") - refusedBefore; d != 20 {
		t.Errorf("tokenreviews_total{result=refused} rose by %v, want 20", d)
	}
	sourceBefore := counter(t, throttled, "limit", "source")

	o = generous()
	o.SourceRate, o.SourceBurst = 1, 10
	g = newGuarded(t, o)
	got = codes{}
	for i := range 500 {
		got[g.post("team", "10.1.0.1", fmt.Sprintf("garbage-%d", i), `{"step":1}`).Code]++
	}
	if n := g.reviewer.calls.Load(); n != 10 {
		t.Errorf("500 garbage tokens from one source cost %d TokenReviews, want the source's burst of 10", n)
	}
	if got[401] != 10 || got[429] != 490 {
		t.Errorf("answers %v, want 10 x 401 and 490 x 429", got)
	}
	if d := counter(t, throttled, "limit", "source") - sourceBefore; d != 490 {
		t.Errorf("throttled_total{limit=source} rose by %v, want 490", d)
	}
}

// TestValidTokenFloodCostsOneReview: 2000 reports with one valid token,
// sequential and concurrent, cost one TokenReview.
func TestValidTokenFloodCostsOneReview(t *testing.T) {
	const hits, reviews = "mlplatform_trainingjob_progress_token_cache_hits_total", "mlplatform_trainingjob_progress_tokenreviews_total"
	hitsBefore, reviewsBefore := counter(t, hits, "result", "authenticated"), counter(t, reviews, "result", "authenticated")
	g := newGuarded(t, generous())
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 250 {
				if g.post("team", "10.0.0.1", g.token, `{"step":1}`).Code == http.StatusAccepted {
					accepted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := g.reviewer.calls.Load(); n != 1 {
		t.Errorf("2000 reports with one valid token cost %d TokenReviews, want 1", n)
	}
	if accepted.Load() != 2000 {
		t.Errorf("%d of 2000 reports accepted", accepted.Load())
	}
	// The first request of each goroutine may wait for the one review
	// instead of reading the cache.
	if d := counter(t, hits, "result", "authenticated") - hitsBefore; d < 2000-8 || d > 1999 {
		t.Errorf("token_cache_hits_total{result=authenticated} rose by %v, want 1992 to 1999", d)
	}
	if d := counter(t, reviews, "result", "authenticated") - reviewsBefore; d != 1 {
		t.Errorf("tokenreviews_total{result=authenticated} rose by %v, want 1", d)
	}
}

// TestJobLimitAnswers429: an authorized job past its burst gets 429 with
// Retry-After, counted as throttled by the trainingjob limit.
func TestJobLimitAnswers429(t *testing.T) {
	const throttled = "mlplatform_trainingjob_progress_throttled_total"
	before := counter(t, throttled, "limit", "trainingjob")
	o := generous()
	o.Rate, o.Burst = 0.5, 2
	g := newGuarded(t, o)
	var got []int
	for range 3 {
		got = append(got, g.post("team", "10.0.0.1", g.token, `{"step":1}`).Code)
	}
	rec := g.post("team", "10.0.0.1", g.token, `{"step":1}`)
	if fmt.Sprint(got) != "[202 202 429]" || rec.Code != 429 || rec.Header().Get("Retry-After") != "2" {
		t.Errorf("answers %v then %d with Retry-After %q, want [202 202 429] then 429 with 2", got, rec.Code, rec.Header().Get("Retry-After"))
	}
	if d := counter(t, throttled, "limit", "trainingjob") - before; d != 2 {
		t.Errorf("throttled_total{limit=trainingjob} rose by %v, want 2", d)
	}
}

// TestConcurrentRequestsShareOneReview: requests that arrive together
// with one unknown token, while its review is under way, wait for that
// review instead of making their own. The reviewer holds the review for
// up to 3 s, long enough for every request to arrive; the 8 requests
// pass in either case, only the count of reviews differs.
func TestConcurrentRequestsShareOneReview(t *testing.T) {
	g := newGuarded(t, generous())
	g.reviewer.holdFor, g.reviewer.holdMax = 8, 3*time.Second
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for range 8 {
		wg.Go(func() {
			if g.post("team", "10.0.0.1", g.token, `{"step":1}`).Code == http.StatusAccepted {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := g.reviewer.calls.Load(); n != 1 {
		t.Errorf("8 concurrent reports with one new token cost %d TokenReviews, want 1", n)
	}
	if accepted.Load() != 8 {
		t.Errorf("%d of 8 reports accepted", accepted.Load())
	}
}

// TestCachedReviewsExpire: a success is reused until the token expires or
// the cache's TTL ends, whichever is first; a refusal for NegativeTTL.
func TestCachedReviewsExpire(t *testing.T) {
	for name, tc := range map[string]struct {
		tokenLife, cacheTTL, wait time.Duration
		valid                     bool
		wantReviews               int64
	}{
		"valid, within TTL and life":       {tokenLife: time.Hour, cacheTTL: 2 * time.Minute, wait: 119 * time.Second, valid: true, wantReviews: 1},
		"valid, past the cache TTL":        {tokenLife: time.Hour, cacheTTL: 2 * time.Minute, wait: 121 * time.Second, valid: true, wantReviews: 2},
		"valid, past the token's expiry":   {tokenLife: 30 * time.Second, cacheTTL: 2 * time.Minute, wait: 31 * time.Second, valid: true, wantReviews: 2},
		"refused, within the negative TTL": {tokenLife: time.Hour, cacheTTL: 2 * time.Minute, wait: 9 * time.Second, wantReviews: 1},
		"refused, past the negative TTL":   {tokenLife: time.Hour, cacheTTL: 2 * time.Minute, wait: 11 * time.Second, wantReviews: 2},
	} {
		t.Run(name, func(t *testing.T) {
			o := generous()
			o.Reviews.CacheTTL, o.Reviews.NegativeTTL = tc.cacheTTL, 10*time.Second
			g := newGuarded(t, o)
			token, want := jwt("other", g.clock.Now().Add(tc.tokenLife)), http.StatusUnauthorized
			if tc.valid {
				g.reviewer.pods[token], want = g.reviewer.pods[g.token], http.StatusAccepted
			}
			for _, wait := range []time.Duration{0, tc.wait} {
				g.clock.Step(wait)
				if rec := g.post("team", "10.0.0.1", token, `{"step":1}`); rec.Code != want {
					t.Fatalf("after %s: %d %s, want %d", wait, rec.Code, rec.Body, want)
				}
			}
			if n := g.reviewer.calls.Load(); n != tc.wantReviews {
				t.Errorf("%d TokenReviews, want %d", n, tc.wantReviews)
			}
		})
	}
}

// TestCheapRefusalsCostNoReview: what can be refused without knowing the
// caller is refused before the TokenReview, and a token of another
// namespace's pod is refused with 403, recording nothing.
func TestCheapRefusalsCostNoReview(t *testing.T) {
	for name, tc := range map[string]struct {
		ns, token, body string
		wantCode        int
		wantMsg         string
		wantReviews     int64
	}{
		"no token":             {ns: "team", body: `{"step":1}`, wantCode: 401, wantMsg: "missing bearer token"},
		"body too large":       {ns: "team", token: "garbage", body: `{"step":1,"x":"` + strings.Repeat("y", MaxBodyBytes) + `"}`, wantCode: 413, wantMsg: "at most 4096 bytes"},
		"duplicate step":       {ns: "team", token: "valid", body: `{"step":5,"totalSteps":20,"step":6}`, wantCode: 400, wantMsg: `key "step" appears more than once`},
		"duplicate metric":     {ns: "team", token: "valid", body: `{"step":5,"metrics":{"loss":1,"acc":2,"loss":2}}`, wantCode: 400, wantMsg: `key "loss" appears more than once`},
		"not JSON":             {ns: "team", token: "garbage", body: `{"step":`, wantCode: 400, wantMsg: "not a JSON report"},
		"another namespace":    {ns: "other", token: "valid", body: `{"step":1}`, wantCode: 403, wantMsg: "namespace team, not other", wantReviews: 1},
		"a valid report":       {ns: "team", token: "valid", body: `{"step":1}`, wantCode: 202, wantReviews: 1},
		"refused after review": {ns: "team", token: "garbage", body: `{"step":1}`, wantCode: 401, wantMsg: "not valid for audience", wantReviews: 1},
	} {
		t.Run(name, func(t *testing.T) {
			g := newGuarded(t, generous())
			token := tc.token
			if token == "valid" {
				token = g.token
			}
			rec := g.post(tc.ns, "10.0.0.1", token, tc.body)
			var answer errorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &answer)
			if rec.Code != tc.wantCode || !strings.Contains(answer.Message, tc.wantMsg) {
				t.Errorf("got %d %s, want %d with %q", rec.Code, rec.Body, tc.wantCode, tc.wantMsg)
			}
			if n := g.reviewer.calls.Load(); n != tc.wantReviews {
				t.Errorf("%d TokenReviews, want %d", n, tc.wantReviews)
			}
			if wantReports := map[bool]int{true: 1}[tc.wantCode == 202]; g.reports() != wantReports {
				t.Errorf("the writer holds %d reports, want %d", g.reports(), wantReports)
			}
		})
	}
}

// TestUniqueKeysPerObject: a key may repeat across objects, never within
// one, at any depth.
func TestUniqueKeysPerObject(t *testing.T) {
	for body, wantDup := range map[string]string{
		`{"a":[{"b":1},{"b":2}],"c":{"b":3}}`:   "",
		`{"a":{"b":1},"b":{"a":2}}`:             "",
		`{"a":[],"b":{},"c":[[{"a":1}]]}`:       "",
		`{"a":[{"b":1,"b":2}]}`:                 "b",
		`[1,{"x":1,"y":[1,2],"x":1}]`:           "x",
		`{"a":{"b":{"c":1}},"d":2,"a":3}`:       "a",
		`{"step":1,"metrics":{"l":1},"step":1}`: "step",
		`{"s":"step","step":"s","x":["step"]}`:  "",
		`}`:                                     "",
		`{"a":1}}{"a":1,"a":2}`:                 "",
		`[{"a":1]`:                              "",
		`{"a" 1, "a": 2}`:                       "",
	} {
		err := uniqueKeys([]byte(body))
		if wantDup == "" && err != nil || wantDup != "" && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", wantDup))) {
			t.Errorf("%s: %v, want a duplicate of %q", body, err, wantDup)
		}
	}
}

// TestReplicasAreNotLimitedBySource: reports a standby passed on come
// from its one address; they were limited by their own source there, so
// the leader does not limit them again by the standby's.
func TestReplicasAreNotLimitedBySource(t *testing.T) {
	o := generous()
	o.SourceRate, o.SourceBurst = 1, 2
	g := newGuarded(t, o)
	g.fromReplica = true
	for i := range 10 {
		if rec := g.post("team", "10.2.0.1", g.token, `{"step":1}`); rec.Code != http.StatusAccepted {
			t.Fatalf("report %d passed on by a replica: %d %s", i, rec.Code, rec.Body)
		}
	}
	g.fromReplica = false
	got := codes{}
	for range 10 {
		got[g.post("team", "10.2.0.1", g.token, `{"step":1}`).Code]++
	}
	if got[202] != 2 || got[429] != 8 {
		t.Errorf("a caller that is not a replica: %v, want 2 x 202 and 8 x 429", got)
	}
}
