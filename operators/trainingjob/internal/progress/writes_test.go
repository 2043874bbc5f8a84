package progress_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// statusWrites counts the endpoint's writes of TrainingJob status in ns.
func statusWrites(ep *endpoint, ns string) int {
	return ep.Writes.Namespace(ns).Count("patch", "trainingjobs/status")
}

// TestStatusWritesStayWithinTheInterval: a burst of reports costs at most
// one write per interval (plus the final report's own), nothing is
// written while no report arrives, the last progress stays, and the final
// report is not lost to the interval.
func TestStatusWritesStayWithinTheInterval(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-budget")
	secret, pool := certSecret(t)
	const interval = 2 * time.Second
	ep := startOperator(t, secret, pool, func(o *progress.Options, _ *manager.Config) { o.Interval = interval })
	f := newJob(t, c, ns, "budget")
	token := f.pod(t, c, cs, "budget-r1-0", progress.Audience, rank(0), nil)

	const reports, total = 40, 1000
	start := time.Now()
	for i := 1; i <= reports; i++ {
		if code, body, _ := ep.post(t, ns, "budget", token, fmt.Sprintf(`{"step":%d,"totalSteps":%d}`, i, total)); code != 202 {
			t.Fatalf("report %d: %d %s", i, code, body)
		}
	}
	elapsed := time.Since(start)
	got := waitStep(t, c, f, reports)
	// The first report is written at once, every later one waits for its
	// interval; the wait for the last adds at most one more write.
	bound := 2 + int(elapsed/interval)
	writes := statusWrites(ep, ns)
	t.Logf("%d reports in %s, interval %s: %d status writes (bound %d)", reports, elapsed.Round(time.Millisecond), interval, writes, bound)
	if writes > bound || writes < 1 {
		t.Errorf("%d reports in %s made %d status writes, want 1 to %d (one per %s)", reports, elapsed, writes, bound, interval)
	}
	if got.Percent == nil || *got.Percent != 4 || got.EstimatedCompletionTime == nil {
		t.Errorf("derived progress = %+v, want 4%% and an ETA", got)
	}

	// The reporter stops: no write, and the last progress stays.
	settled := statusWrites(ep, ns)
	testenv.Consistently(t, "no status write without reports", 3*interval, func(ctx context.Context) error {
		if n := statusWrites(ep, ns); n != settled {
			return fmt.Errorf("%d status writes, %d when the reports stopped", n, settled)
		}
		p, err := progressOf(ctx, c, f)
		if err != nil || p == nil || p.Step != reports || !p.LastReportTime.Equal(&got.LastReportTime) {
			return fmt.Errorf("progress changed to %+v (%w)", p, err)
		}
		return nil
	})

	// A report and right after it the final one: the final one is
	// written at once, not an interval later, and never overwritten by
	// the one before.
	for _, step := range []int{total - 1, total} {
		if code, body, _ := ep.post(t, ns, "budget", token, fmt.Sprintf(`{"step":%d,"totalSteps":%d}`, step, total)); code != 202 {
			t.Fatalf("report %d: %d %s", step, code, body)
		}
	}
	final := waitStep(t, c, f, total)
	if final.Percent == nil || *final.Percent != 100 {
		t.Errorf("final progress = %+v, want 100%%", final)
	}
	testenv.Consistently(t, "the final report stays", 2*interval, func(ctx context.Context) error {
		p, err := progressOf(ctx, c, f)
		if err != nil || p == nil || p.Step != total {
			return fmt.Errorf("progress %+v (%w)", p, err)
		}
		return nil
	})
}

// startReplicas runs two replicas behind one Service, with tune applied
// to both, and returns them once the first leads and has published its
// address.
func startReplicas(t *testing.T, c client.Client, tune func(*progress.Options)) (leader, standby *endpoint) {
	t.Helper()
	leaseNS := testenv.CreateNamespace(t, c, "progress-lease")
	secret, pool := certSecret(t)
	replica := func(o *progress.Options, cfg *manager.Config) {
		cfg.LeaderElect, cfg.LeaderElectionNamespace = true, leaseNS
		o.Namespace, o.AdvertiseAddress = leaseNS, o.BindAddress
		if tune != nil {
			tune(o)
		}
	}
	leader = startOperator(t, secret, pool, replica)
	select {
	case <-leader.Elected():
	case <-time.After(testenv.EventuallyTimeout):
		t.Fatal("the first replica did not lead")
	}
	testenv.Eventually(t, "the leader to publish its address", func(ctx context.Context) (bool, error) {
		var lease coordinationv1.Lease
		err := c.Get(ctx, types.NamespacedName{Namespace: leaseNS, Name: operatorName + "-progress.mlplatform.dev"}, &lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == leader.addr, nil
	})
	return leader, startOperator(t, secret, pool, replica)
}

// TestNonLeaderPassesReportsToTheLeader: two replicas behind one Service;
// a report that reaches the standby is written by the leader, and the
// standby writes nothing.
func TestNonLeaderPassesReportsToTheLeader(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-ha")
	leader, standby := startReplicas(t, c, nil)

	f := newJob(t, c, ns, "ha")
	token := f.pod(t, c, cs, "ha-r1-0", progress.Audience, rank(0), nil)
	if code, body, _ := standby.post(t, ns, "ha", token, `{"step":7,"totalSteps":10}`); code != 202 {
		t.Fatalf("report to the standby: %d %s", code, body)
	}
	waitStep(t, c, f, 7)
	select {
	case <-standby.Elected():
		t.Fatal("the standby leads too: the test shows nothing")
	default:
	}
	if n := statusWrites(standby, ns); n != 0 {
		t.Errorf("the standby wrote status %d times", n)
	}
	if n := statusWrites(leader, ns); n != 1 {
		t.Errorf("the leader wrote status %d times, want 1", n)
	}
	// Refusals come back from the leader unchanged.
	if code, body, _ := standby.post(t, ns, "other", token, `{"step":1}`); code != 403 {
		t.Errorf("a refused report through the standby: %d %s, want 403", code, body)
	}
}

// TestStandbyPassesReportsOnWithoutTheLeaderLimitingItsAddress: each
// source address may send one report at once; five pods at five
// addresses report through the standby, which limits each by its own
// address and passes it on. The leader sees them all come from the
// standby's one address, but the standby proves it is a replica (its TLS
// client certificate is the endpoint's own), so none is refused there; a
// sixth report from an address that already sent one is refused by the
// standby.
func TestStandbyPassesReportsOnWithoutTheLeaderLimitingItsAddress(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-ha-limit")
	_, standby := startReplicas(t, c, func(o *progress.Options) { o.SourceRate, o.SourceBurst = 0.001, 1 })
	f := newJob(t, c, ns, "many")
	token := f.pod(t, c, cs, "many-r1-0", progress.Audience, rank(0), nil)

	for i := 2; i <= 6; i++ {
		if code, body, _ := standby.postFrom(t, fmt.Sprintf("127.0.0.%d", i), ns, "many", token, fmt.Sprintf(`{"step":%d}`, i)); code != 202 {
			t.Fatalf("report from 127.0.0.%d through the standby: %d %s", i, code, body)
		}
	}
	code, body, retryAfter := standby.postFrom(t, "127.0.0.2", ns, "many", token, `{"step":7}`)
	if code != 429 || !strings.Contains(body, "from this address") || retryAfter == "" {
		t.Errorf("a second report from 127.0.0.2: %d %s (Retry-After %q), want 429 from the standby's source limit", code, body, retryAfter)
	}
	waitStep(t, c, f, 6)
}

// TestFinalReportIsNotHeldBackByTheInterval: with an interval far longer
// than the test, the first report and the final one are written at once,
// a report in between waits, and a leader that stops writes what it held.
func TestFinalReportIsNotHeldBackByTheInterval(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-final")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, func(o *progress.Options, _ *manager.Config) { o.Interval = time.Hour })
	done, held := newJob(t, c, ns, "done"), newJob(t, c, ns, "held")
	doneToken := done.pod(t, c, cs, "done-r1-0", progress.Audience, rank(0), nil)
	heldToken := held.pod(t, c, cs, "held-r1-0", progress.Audience, rank(0), nil)

	post := func(job, token string, step int) {
		t.Helper()
		if code, body, _ := ep.post(t, ns, job, token, fmt.Sprintf(`{"step":%d,"totalSteps":20}`, step)); code != 202 {
			t.Fatalf("%s step %d: %d %s", job, step, code, body)
		}
	}
	post("done", doneToken, 1)
	post("held", heldToken, 1)
	waitStep(t, c, done, 1)
	waitStep(t, c, held, 1)
	post("done", doneToken, 19)
	post("held", heldToken, 5)
	post("done", doneToken, 20)
	waitStep(t, c, done, 20)
	testenv.Consistently(t, "step 5 waits for the interval", 2*time.Second, func(ctx context.Context) error {
		if p, err := progressOf(ctx, c, held); err != nil || p == nil || p.Step != 1 {
			return fmt.Errorf("progress %+v (%w)", p, err)
		}
		return nil
	})

	ep.Stop(t)
	waitStep(t, c, held, 5)
	if p, err := progressOf(t.Context(), c, done); err != nil || p == nil || p.Step != 20 {
		t.Errorf("the final report was overwritten: %+v (%v)", p, err)
	}
}
