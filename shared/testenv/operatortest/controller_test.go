package operatortest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// marker is a reconciler in the shape of the operators': it sets the
// label Key on every ConfigMap, and registers itself under a name.
type marker struct {
	client.Client
	Key string
	// registeredKey is Key when SetupWithManager ran.
	registeredKey string
}

func (r *marker) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, req.NamespacedName, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Labels[r.Key] == "true" {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Labels = map[string]string{r.Key: "true"}
	return ctrl.Result{}, r.Patch(ctx, cm, patch)
}

func (r *marker) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.registeredKey = r.Key
	return ctrl.NewControllerManagedBy(mgr).Named("marker").For(&corev1.ConfigMap{}).WithOptions(opts).Complete(r)
}

// expectOneMark creates a ConfigMap in a new namespace and expects op to
// mark it with the label key, with one patch.
func expectOneMark(t *testing.T, scheme *runtime.Scheme, op *Operator, key string) {
	t.Helper()
	c := testenv.NewClient(t, env.Config, scheme)
	ns := testenv.CreateNamespace(t, c, "optest")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marked"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the ConfigMap is marked "+key, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
		return err == nil && cm.Labels[key] == "true", err
	})
	if got := op.Writes.Namespace(ns).Count("patch", "configmaps"); got != 1 {
		t.Errorf("the operator's ConfigMap patches in %s = %d, want 1: %s", ns, got, op.Writes.Namespace(ns))
	}
}

func markerOperator(scheme *runtime.Scheme) Options {
	return Options{RESTConfig: env.Config, Manager: manager.Options{Name: "marker-operator", Scheme: scheme}}
}

func buildMarker(mgr ctrl.Manager, _ manager.Config) (*marker, error) {
	return &marker{Client: mgr.GetClient(), Key: "built"}, nil
}

func TestStartControllerTunesTheBuiltReconcilerBeforeRegisteringIt(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	op, r := StartController(t, markerOperator(scheme), Controller[*marker]{
		Build: buildMarker,
		Tune:  func(r *marker) { r.Key = "tuned" },
	})
	if r == nil || r.registeredKey != "tuned" {
		t.Fatalf("the returned reconciler is %+v, want the built one, tuned before SetupWithManager", r)
	}

	expectOneMark(t, scheme, op, "tuned")
}

func TestRunControllerRegistersThroughRegister(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	var gotConcurrency int
	op, r, err := RunController(markerOperator(scheme), Controller[*marker]{
		Build: buildMarker,
		Register: func(mgr ctrl.Manager, r *marker, opts controller.Options) error {
			opts.MaxConcurrentReconciles = 3
			gotConcurrency = opts.MaxConcurrentReconciles
			return ctrl.NewControllerManagedBy(mgr).Named("wrapped-marker").For(&corev1.ConfigMap{}).WithOptions(opts).Complete(r)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Shutdown() })
	if r == nil || r.Key != "built" {
		t.Fatalf("the returned reconciler is %+v, want the built one", r)
	}
	if r.registeredKey != "" || gotConcurrency != 3 {
		t.Errorf("Register was bypassed: SetupWithManager ran (%q) or the options were not Register's (%d)", r.registeredKey, gotConcurrency)
	}
}
