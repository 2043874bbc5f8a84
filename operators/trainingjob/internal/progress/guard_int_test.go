package progress_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	trainingtesting "github.com/ml-platform/ml-platform/apis/training/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// tokenReviews is how many TokenReviews the endpoint made: the operator's
// API writes are counted at its REST config, which the endpoint's own
// review client copies.
func tokenReviews(ep *endpoint) int {
	return ep.Writes.Count("create", "tokenreviews")
}

// requests is the endpoint's count of answers with code, across every
// operator of this process (tests take differences); name is
// mlplatform_trainingjob_progress_requests_total.
func requests(t *testing.T, name string, code int) float64 {
	t.Helper()
	return metricstest.Value(t, name, map[string]string{"code": fmt.Sprint(code)})
}

// nothingWritten checks for a while that the fixtures' status.progress
// stays empty and the endpoint wrote no status in their namespaces.
func nothingWritten(t *testing.T, c client.Client, ep *endpoint, fixtures ...*fixture) {
	t.Helper()
	testenv.Consistently(t, "no progress written for refused reports", 3*time.Second, func(ctx context.Context) error {
		for _, f := range fixtures {
			if p, err := progressOf(ctx, c, f); err != nil || p != nil {
				return fmt.Errorf("%s/%s: progress %+v, error %w", f.ns, f.tj.Name, p, err)
			}
			if n := statusWrites(ep, f.ns); n != 0 {
				return fmt.Errorf("%d status writes in %s", n, f.ns)
			}
		}
		return nil
	})
}

// TestFloodsCostBoundedTokenReviews: on the real API server, a flood of
// garbage tokens costs at most the endpoint's budget of TokenReviews (and
// from one address, at most that address's burst), a flood with one
// valid token costs one, and a request without a token none.
func TestFloodsCostBoundedTokenReviews(t *testing.T) {
	const requestsTotal = "mlplatform_trainingjob_progress_requests_total"
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-flood")
	secret, pool := certSecret(t)

	t.Run("garbage tokens, review budget", func(t *testing.T) {
		// The budget barely refills during the test: 0.01 per second.
		ep := startOperator(t, secret, pool, func(o *progress.Options, _ *manager.Config) {
			o.Reviews.Rate, o.Reviews.Burst = 0.01, 10
		})
		start := time.Now()
		got := map[int]int{}
		for i := range 100 {
			code, _, _ := ep.post(t, ns, "flood", fmt.Sprintf("garbage-%d", i), `{"step":1}`)
			got[code]++
		}
		bound := 10 + int(time.Since(start).Seconds()*0.01)
		if n := tokenReviews(ep); n > bound || n < 10 {
			t.Errorf("100 garbage tokens cost %d TokenReviews, want 10 to %d (the budget)", n, bound)
		}
		if got[429] < 100-bound || got[401] > bound {
			t.Errorf("answers %v: want at most %d x 401, the rest 429", got, bound)
		}
	})

	t.Run("garbage tokens, one source", func(t *testing.T) {
		ep := startOperator(t, secret, pool, func(o *progress.Options, _ *manager.Config) {
			o.SourceRate, o.SourceBurst = 0.01, 10
		})
		start := time.Now()
		before429 := requests(t, requestsTotal, 429)
		for i := range 100 {
			ep.post(t, ns, "flood", fmt.Sprintf("garbage-%d", i), `{"step":1}`)
		}
		bound := 10 + int(time.Since(start).Seconds()*0.01)
		if n := tokenReviews(ep); n > bound || n < 10 {
			t.Errorf("100 garbage tokens from one address cost %d TokenReviews, want 10 to %d (its burst)", n, bound)
		}
		if d := requests(t, requestsTotal, 429) - before429; d < float64(100-bound) {
			t.Errorf("mlplatform_trainingjob_progress_requests_total{code=\"429\"} rose by %v, want at least %d", d, 100-bound)
		}
	})

	t.Run("connections that are not TLS", func(t *testing.T) {
		const connErrors = "mlplatform_trainingjob_progress_connection_errors_total"
		ep := startOperator(t, secret, pool, nil)
		ep.post(t, ns, "flood", "garbage", `{"step":1}`)
		before := metricstest.Value(t, connErrors, nil)
		for range 20 {
			conn, err := net.DialTimeout("tcp", ep.addr, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = conn.Write([]byte("\x00\x01 not a TLS client hello\r\n\r\n"))
			_ = conn.Close()
		}
		// The server's error log reaches the endpoint's counter (and its
		// structured, rate-limited log line), not the standard logger.
		testenv.Eventually(t, "20 failed handshakes counted", func(context.Context) (bool, error) {
			return metricstest.Value(t, connErrors, nil)-before == 20, nil
		})
	})

	t.Run("one valid token", func(t *testing.T) {
		ep := startOperator(t, secret, pool, nil)
		f := newJob(t, c, ns, "flood")
		token := f.pod(t, c, cs, "flood-r1-0", progress.Audience, rank(0), nil)
		before202 := requests(t, requestsTotal, 202)
		for i := range 300 {
			if code, body, _ := ep.post(t, ns, "flood", token, fmt.Sprintf(`{"step":%d}`, i)); code != 202 {
				t.Fatalf("report %d: %d %s", i, code, body)
			}
		}
		if n := tokenReviews(ep); n != 1 {
			t.Errorf("300 reports with one valid token cost %d TokenReviews, want 1", n)
		}
		if d := requests(t, requestsTotal, 202) - before202; d != 300 {
			t.Errorf("mlplatform_trainingjob_progress_requests_total{code=\"202\"} rose by %v, want 300", d)
		}
		if code, body, _ := ep.post(t, ns, "flood", "", `{"step":1}`); code != 401 || !strings.Contains(body, "missing bearer token") {
			t.Errorf("no token: %d %s", code, body)
		}
		if n := tokenReviews(ep); n != 1 {
			t.Errorf("a request without a token made a TokenReview (%d in all)", n)
		}
	})
}

// TestReportsOfAnEarlierRunAreRefused: a pod of an earlier TrainingJob,
// or of an earlier Job, of the same name keeps a valid token after its
// owner was deleted and recreated; its reports get 403 and reach no
// status.
func TestReportsOfAnEarlierRunAreRefused(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-earlier")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, nil)

	// The TrainingJob is recreated under its name; the old Job and pod
	// stay (no garbage collector runs here, as when it lags behind).
	old := newJob(t, c, ns, "again")
	oldToken := old.pod(t, c, cs, "again-r1-0", progress.Audience, rank(0), nil)
	if err := c.Delete(t.Context(), old.tj); err != nil {
		t.Fatal(err)
	}
	again := recreate(t, c, ep, old.tj)

	// The Job is recreated under its name by the same TrainingJob; the
	// old Job's pod stays.
	same := newJob(t, c, ns, "rejob")
	rejobToken := same.pod(t, c, cs, "rejob-r1-0", progress.Audience, rank(0), nil)
	newRun := replaceRun(t, c, ep, same)

	for name, tc := range map[string]struct {
		job, token, wantMsg string
	}{
		"pod of an earlier TrainingJob": {job: "again", token: oldToken, wantMsg: "belongs to an earlier TrainingJob named again"},
		"pod of an earlier Job":         {job: "rejob", token: rejobToken, wantMsg: "the pod's Job rejob-r1 was replaced"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body, _ := ep.post(t, ns, tc.job, tc.token, goodReport)
			if code != 403 || !strings.Contains(errorMessage(t, body), tc.wantMsg) {
				t.Errorf("got %d %s, want 403 with %q", code, body, tc.wantMsg)
			}
		})
	}
	nothingWritten(t, c, ep, again, same)

	// The current run's rank 0 still reports: only the earlier ones were
	// refused.
	current := &fixture{ns: ns, tj: same.tj, run: newRun}
	token := current.pod(t, c, cs, "rejob-r1-0-new", progress.Audience, rank(0), nil)
	if code, body, _ := ep.post(t, ns, "rejob", token, goodReport); code != 202 {
		t.Fatalf("the current run's rank 0: %d %s", code, body)
	}
	waitStep(t, c, same, 5)
}

// recreate creates a TrainingJob of old's name again and waits until the
// endpoint's cache holds the new one.
func recreate(t *testing.T, c client.Client, ep *endpoint, old *trainingv1alpha1.TrainingJob) *fixture {
	t.Helper()
	tj := trainingtesting.MakeTrainingJob(old.Namespace, old.Name, 1).Obj()
	testenv.Eventually(t, "the TrainingJob to be recreated", func(ctx context.Context) (bool, error) {
		return c.Create(ctx, tj) == nil, nil
	})
	if tj.UID == old.UID {
		t.Fatal("the recreated TrainingJob kept its UID")
	}
	waitCached(t, ep, client.ObjectKeyFromObject(tj), &trainingv1alpha1.TrainingJob{}, tj.UID)
	return &fixture{ns: tj.Namespace, tj: tj}
}

// replaceRun deletes f's Job and creates another of the same name for the
// same TrainingJob, and waits until the endpoint's cache holds it. The
// old Job's pods stay.
func replaceRun(t *testing.T, c client.Client, ep *endpoint, f *fixture) *batchv1.Job {
	t.Helper()
	old := f.run.(*batchv1.Job)
	// In the background: no garbage collector runs here, so the pods
	// keep their references to the old Job, as with a lagging collector.
	if err := c.Delete(t.Context(), old, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	job := newRun(t, c, f.tj)
	waitCached(t, ep, client.ObjectKeyFromObject(job), &batchv1.Job{}, job.UID)
	return job
}

// waitCached waits until the endpoint's cache holds the object key with uid.
func waitCached(t *testing.T, ep *endpoint, key types.NamespacedName, obj client.Object, uid types.UID) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("the endpoint's cache to hold %s %s", key, uid), func(ctx context.Context) (bool, error) {
		return ep.GetCache().Get(ctx, key, obj) == nil && obj.GetUID() == uid, nil
	})
}

// TestOtherNamespaceIsRefusedWithTheChainIntact: two namespaces hold a
// TrainingJob of one name, each with its Job and rank 0 pod, so every
// check but the namespace passes; a token of one namespace's pod reporting
// for the other gets 403 and changes no status, while each pod still
// reports for its own job.
func TestOtherNamespaceIsRefusedWithTheChainIntact(t *testing.T) {
	c, cs := admin(t)
	nsA := testenv.CreateNamespace(t, c, "progress-twin-a")
	nsB := testenv.CreateNamespace(t, c, "progress-twin-b")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, nil)
	a, b := newJob(t, c, nsA, "twin"), newJob(t, c, nsB, "twin")
	tokenA := a.pod(t, c, cs, "twin-r1-0", progress.Audience, rank(0), nil)
	tokenB := b.pod(t, c, cs, "twin-r1-0", progress.Audience, rank(0), nil)

	for _, tc := range []struct{ ns, token, from string }{{nsB, tokenA, nsA}, {nsA, tokenB, nsB}} {
		code, body, _ := ep.post(t, tc.ns, "twin", tc.token, goodReport)
		if want := fmt.Sprintf("the token's pod is in namespace %s, not %s", tc.from, tc.ns); code != 403 || errorMessage(t, body) != want {
			t.Errorf("a pod of %s reporting for %s: %d %s, want 403 %q", tc.from, tc.ns, code, body, want)
		}
	}
	nothingWritten(t, c, ep, a, b)

	for _, tc := range []struct {
		f     *fixture
		token string
	}{{a, tokenA}, {b, tokenB}} {
		if code, body, _ := ep.post(t, tc.f.ns, "twin", tc.token, goodReport); code != 202 {
			t.Fatalf("the rank 0 of %s for its own job: %d %s", tc.f.ns, code, body)
		}
		waitStep(t, c, tc.f, 5)
	}
}
