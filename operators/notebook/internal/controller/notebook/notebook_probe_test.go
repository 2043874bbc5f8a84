package notebook

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
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
	// Status is written while the probe hangs; not answering is for a
	// probe that failed, which this one has not yet.
	waitNotebook(t, c, nb, "Reconciling Starting while the first probe hangs", reconcilingWith(notebooksv1alpha1.ReasonStarting))

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

// TestServerRunChangesWithTheServer: an answer is kept for one run of the
// server, so the run must change whenever the server may have: another
// start by the operator, another pod, another Notebook of the same name.
// A pod not ready or on its way out serves nothing yet.
func TestServerRunChangesWithTheServer(t *testing.T) {
	nb := newNotebook("team", "nb")
	nb.UID = "nb-1"
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{render.AnnotationStartedAt: "2026-03-02T09:00:00Z"}}}
	pod := func(uid types.UID, ready corev1.ConditionStatus, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return p
	}
	base := serverRun(nb, sts, []corev1.Pod{pod("pod-1", corev1.ConditionTrue, false)})
	if want := (jupyter.Run{Notebook: "nb-1", StartedAt: "2026-03-02T09:00:00Z", Pod: "pod-1"}); base != want {
		t.Fatalf("run %+v, want %+v", base, want)
	}
	restarted := sts.DeepCopy()
	restarted.Annotations[render.AnnotationStartedAt] = "2026-03-02T10:00:00Z"
	recreated := nb.DeepCopy()
	recreated.UID = "nb-2"
	for name, run := range map[string]jupyter.Run{
		"started again":    serverRun(nb, restarted, []corev1.Pod{pod("pod-1", corev1.ConditionTrue, false)}),
		"another pod":      serverRun(nb, sts, []corev1.Pod{pod("pod-2", corev1.ConditionTrue, false)}),
		"pod not ready":    serverRun(nb, sts, []corev1.Pod{pod("pod-1", corev1.ConditionFalse, false)}),
		"pod terminating":  serverRun(nb, sts, []corev1.Pod{pod("pod-1", corev1.ConditionTrue, true)}),
		"another Notebook": serverRun(recreated, sts, []corev1.Pod{pod("pod-1", corev1.ConditionTrue, false)}),
	} {
		if run == base {
			t.Errorf("%s: the run is unchanged (%+v), so an answer of the old server would be used", name, run)
		}
	}
}
