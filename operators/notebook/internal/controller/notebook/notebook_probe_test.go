package notebook

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// gatedProber is a Jupyter server that accepts a probe and answers only
// once the test opens the gate: until then it hangs, as a hostile or
// broken tenant's server can, for as long as the test wants and not for a
// timeout that a loaded machine could outlast.
// The operator reconciles the Notebooks earlier tests left too; the
// gate holds only those of the test's namespace, and only those are
// counted.
type gatedProber struct {
	ns     string
	gate   chan struct{}
	answer jupyter.Observation
	probes atomic.Int32
}

func (g *gatedProber) Probe(ctx context.Context, t jupyter.Target) jupyter.Observation {
	if !strings.HasPrefix(t.BaseURL, "fake://"+g.ns+"/") {
		return idleAt(t0)
	}
	g.probes.Add(1)
	select {
	case <-g.gate:
		return g.answer
	case <-ctx.Done():
		return jupyter.Observation{Err: ctx.Err()}
	}
}

func reconcilingWith(reason string) func(*notebooksv1alpha1.Notebook) bool {
	return func(nb *notebooksv1alpha1.Notebook) bool {
		c := conditions.Get(nb, commonv1alpha1.ConditionReconciling)
		return conditions.IsTrue(nb, commonv1alpha1.ConditionReconciling) && c.Reason == reason
	}
}

// TestReconcileDoesNotWaitForAHangingServer: a tenant's Jupyter server
// that never answers must not hold a reconcile worker. While its probe
// hangs, reconciles return (a flood of them starts no second probe) and
// the Notebook shows that Jupyter does not answer; once the server
// answers, the Notebook is reconciled again without anything else
// happening to it, and its answer is what the status reports.
func TestReconcileDoesNotWaitForAHangingServer(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	server := &gatedProber{ns: ns, gate: make(chan struct{}), answer: idleAt(t0)}
	op := startOperator(t, operatorOptions{prober: server})
	nb := newNotebook(ns, "hanging")
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	actOutStatefulSet(t, c, nb)
	testenv.Eventually(t, "a probe of the server is in flight", func(context.Context) (bool, error) {
		return server.probes.Load() > 0, nil
	})
	waitNotebook(t, c, nb, "Reconciling JupyterNotReady while the probe hangs", reconcilingWith(notebooksv1alpha1.ReasonJupyterNotReady))

	// The gate stays shut until every reconcile below has returned: a
	// reconcile that waited for the server would never return.
	returned := make(chan error, 1)
	go func() {
		for range 20 {
			if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(nb)}); err != nil {
				returned <- err
				return
			}
		}
		returned <- nil
	}()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	case <-time.After(testenv.EventuallyTimeout):
		t.Fatalf("20 reconciles did not return within %v while the server hangs", testenv.EventuallyTimeout)
	}
	if n := server.probes.Load(); n != 1 {
		t.Fatalf("%d probes of one notebook's server, want 1 however often it is reconciled", n)
	}

	close(server.gate)
	got := waitNotebook(t, c, nb, "Ready once the server answers", isReady)
	if got.Status.LastActivity == nil || !got.Status.LastActivity.Time.Equal(t0) {
		t.Errorf("lastActivity = %v, want the answer's %v", got.Status.LastActivity, t0)
	}
}
