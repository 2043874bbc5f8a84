package notebook

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	notebookstesting "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/lifecycle"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
	t0     = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	// operatorConfig, when set, is what the operator authenticates as
	// (the chart test impersonates the chart's ServiceAccount).
	operatorConfig *rest.Config
)

func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = notebooksv1alpha1.AddToScheme(scheme)
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "charts", "notebook-operator", "files", "crds")},
		ControllerManager: true,
	}, &env)
}

// fakeProber answers with scripted observations per Notebook.
type fakeProber struct {
	mu     sync.Mutex
	obs    map[string]jupyter.Observation
	probes map[string]int
	tokens map[string]string
}

func newFakeProber() *fakeProber {
	return &fakeProber{obs: map[string]jupyter.Observation{}, probes: map[string]int{}, tokens: map[string]string{}}
}

func fakeEndpoint(nb *notebooksv1alpha1.Notebook) string {
	return "fake://" + nb.Namespace + "/" + nb.Name
}

func (f *fakeProber) Probe(_ context.Context, t jupyter.Target) jupyter.Observation {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes[t.BaseURL]++
	f.tokens[t.BaseURL] = t.Token
	if o, ok := f.obs[t.BaseURL]; ok {
		return o
	}
	return jupyter.Observation{Err: &jupyter.HTTPError{Path: "api/status", Code: 503}}
}

func (f *fakeProber) set(nb *notebooksv1alpha1.Notebook, o jupyter.Observation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.obs[fakeEndpoint(nb)] = o
}

func (f *fakeProber) count(nb *notebooksv1alpha1.Notebook) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes[fakeEndpoint(nb)]
}

func (f *fakeProber) token(nb *notebooksv1alpha1.Notebook) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens[fakeEndpoint(nb)]
}

// operator is a running manager with the Notebook reconciler, talking to
// the test API server through a write counter.
type operator struct {
	*operatortest.Operator
	reconciler *Reconciler
	prober     *fakeProber
	clock      *clocktesting.FakeClock

	mu sync.Mutex
	// decidedAt is, per Notebook, the fake time of the latest reconcile
	// that finished without waiting for a probe: one that decided on an
	// answer fresh at that time, or needed none.
	decidedAt map[client.ObjectKey]time.Time
}

// recordDecision wraps the Runner's AfterWrite to fill decidedAt.
func (op *operator) recordDecision(r *Reconciler) {
	after := r.runner.AfterWrite
	r.runner.AfterWrite = func(s *scope, before, obj *notebooksv1alpha1.Notebook, written bool) {
		after(s, before, obj, written)
		if s.probePending {
			return
		}
		op.mu.Lock()
		defer op.mu.Unlock()
		op.decidedAt[client.ObjectKeyFromObject(s.nb)] = s.now
	}
}

func testConfig() config.Config {
	cfg := config.Default()
	cfg.NetworkPolicy.OperatorNamespace = "mlp-system"
	cfg.NetworkPolicy.OperatorPodLabels = map[string]string{"app.kubernetes.io/name": "notebook-operator"}
	return cfg
}

type operatorOptions struct {
	restConfig *rest.Config
	config     *config.Config
	prober     Prober
	// namespaces makes a namespace-scoped operator (--watch-namespaces).
	namespaces []string
}

func startOperator(t *testing.T, o operatorOptions) *operator {
	t.Helper()
	op := &operator{prober: newFakeProber(), clock: clocktesting.NewFakeClock(t0), decidedAt: map[client.ObjectKey]time.Time{}}
	base := o.restConfig
	if base == nil {
		base = operatorConfig
	}
	if base == nil {
		base = env.Config
	}
	cfg := testConfig()
	if o.config != nil {
		cfg = *o.config
	}
	prober := Prober(op.prober)
	if o.prober != nil {
		prober = o.prober
	}
	op.Operator, op.reconciler = operatortest.StartController(t, operatortest.Options{
		RESTConfig: base,
		Tune:       func(c *manager.Config) { c.WatchNamespaces = o.namespaces },
		Manager:    manager.Options{Name: render.OperatorName, Scheme: scheme, OwnedObjects: OwnedObjects()},
	}, operatortest.Controller[*Reconciler]{
		Build: func(mgr ctrl.Manager, mc manager.Config) (*Reconciler, error) {
			r, err := NewReconciler(mgr, cfg, accelerator.Default())
			if err != nil {
				return nil, err
			}
			r.Prober, r.Clock, r.Endpoint = prober, op.clock, fakeEndpoint
			r.Namespaces = mc.CacheNamespaces()
			return r, nil
		},
		Register: func(mgr ctrl.Manager, r *Reconciler, opts controller.Options) error {
			if err := r.SetupWithManager(mgr, opts); err != nil {
				return err
			}
			op.recordDecision(r)
			return nil
		},
	})
	return op
}

// reconcile runs a culling check as a timed requeue does: a reconcile,
// which asks for a new probe when the last answer is older than the fake
// clock allows; the answer then brings the Notebook back to the
// operator's own workers, and reconcile waits until one of them has
// decided on it. What the test checks next was decided on an answer as of
// the fake clock's now, by one reconcile: a second one of the test's at
// the same time could decide the same cull again from a cache that does
// not show the first yet. The result is the first reconcile's.
func (op *operator) reconcile(t *testing.T, nb *notebooksv1alpha1.Notebook) ctrl.Result {
	t.Helper()
	key := client.ObjectKeyFromObject(nb)
	res := op.reconcileOnce(t, key)
	now := op.clock.Now()
	testenv.Eventually(t, "a reconcile decided on an answer as of now", func(context.Context) (bool, error) {
		op.mu.Lock()
		defer op.mu.Unlock()
		return !op.decidedAt[key].Before(now), nil
	})
	return res
}

func (op *operator) reconcileOnce(t *testing.T, key client.ObjectKey) ctrl.Result {
	t.Helper()
	res, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

// answer has the fake server answer o from now on, and moves the clock
// past the age of the last answer the decisions may use, so that the next
// check probes again.
func (op *operator) answer(nb *notebooksv1alpha1.Notebook, o jupyter.Observation) {
	op.prober.set(nb, o)
	op.clock.Step(lifecycle.MaxObservationAge(op.reconciler.Config.Culling.PolicyFor(nb.Spec.Culling)) + time.Second)
}

func newNotebook(ns, name string) *notebooksv1alpha1.Notebook {
	return notebookstesting.MakeNotebook(ns, name).Obj()
}

func getNotebook(ctx context.Context, c client.Client, nb *notebooksv1alpha1.Notebook) (*notebooksv1alpha1.Notebook, error) {
	got := &notebooksv1alpha1.Notebook{}
	err := c.Get(ctx, client.ObjectKeyFromObject(nb), got)
	return got, err
}

func getStatefulSet(ctx context.Context, c client.Client, nb *notebooksv1alpha1.Notebook) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := c.Get(ctx, client.ObjectKeyFromObject(nb), sts)
	return sts, err
}

// waitNotebook polls until cond holds for the Notebook.
func waitNotebook(t *testing.T, c client.Client, nb *notebooksv1alpha1.Notebook, what string, cond func(*notebooksv1alpha1.Notebook) bool) *notebooksv1alpha1.Notebook {
	t.Helper()
	var got *notebooksv1alpha1.Notebook
	testenv.Eventually(t, what, func(ctx context.Context) (bool, error) {
		var err error
		got, err = getNotebook(ctx, c, nb)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return got.Status.ObservedGeneration == got.Generation && cond(got), nil
	})
	return got
}

// actOutStatefulSet plays the StatefulSet controller: the pod is ready
// when the StatefulSet asks for one, and gone when it asks for none.
func actOutStatefulSet(t *testing.T, c client.Client, nb *notebooksv1alpha1.Notebook) *appsv1.StatefulSet {
	t.Helper()
	var sts *appsv1.StatefulSet
	testenv.Eventually(t, "statefulset exists", func(ctx context.Context) (bool, error) {
		var err error
		sts, err = getStatefulSet(ctx, c, nb)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	ready := int32(0)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas > 0 {
		ready = 1
	}
	sts.Status.ObservedGeneration = sts.Generation
	sts.Status.Replicas = ready
	sts.Status.ReadyReplicas = ready
	sts.Status.AvailableReplicas = ready
	sts.Status.CurrentReplicas = ready
	sts.Status.UpdatedReplicas = ready
	if err := c.Status().Update(t.Context(), sts); err != nil {
		t.Fatal(err)
	}
	return sts
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// updateNotebook changes a Notebook as its user would, retrying when the
// operator's status write got in between.
func updateNotebook(t *testing.T, c client.Client, nb *notebooksv1alpha1.Notebook, mutate func(*notebooksv1alpha1.Notebook)) *notebooksv1alpha1.Notebook {
	t.Helper()
	var got *notebooksv1alpha1.Notebook
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if got, err = getNotebook(t.Context(), c, nb); err != nil {
			return err
		}
		mutate(got)
		return c.Update(t.Context(), got)
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitCacheCurrent waits until the operator's cache holds the Notebook and
// its StatefulSet as the API server does, so that the operator's own
// writes so far have come back through its watches and the next reconcile
// starts from them: what a test counts after it is the reconcile's doing.
func waitCacheCurrent(t *testing.T, c client.Client, op *operator, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	testenv.Eventually(t, "the operator's cache is current", func(ctx context.Context) (bool, error) {
		live, err := getNotebook(ctx, c, nb)
		if err != nil {
			return false, err
		}
		cached, err := getNotebook(ctx, op.reconciler.Client, nb)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		liveSts, err := getStatefulSet(ctx, c, nb)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		cachedSts, err := getStatefulSet(ctx, op.reconciler.Client, nb)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cached.ResourceVersion == live.ResourceVersion && cachedSts.ResourceVersion == liveSts.ResourceVersion, nil
	})
}

// writesIn is the view of the operator's writes into namespace ns: the
// operator also reconciles what earlier tests left in theirs.
func (op *operator) writesIn(ns string) *testenv.WriteView { return op.Writes.Namespace(ns) }
