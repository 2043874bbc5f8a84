package operatortest

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// labeller is a minimal operator: it labels every ConfigMap it sees.
func labeller(scheme *runtime.Scheme) manager.Options {
	return manager.Options{
		Name:   "labeller-operator",
		Scheme: scheme,
		Setup: func(mgr ctrl.Manager, cfg manager.Config) error {
			c := mgr.GetClient()
			return ctrl.NewControllerManagedBy(mgr).Named("labeller").For(&corev1.ConfigMap{}).WithOptions(cfg.ControllerOptions()).
				Complete(reconcilerFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
					cm := &corev1.ConfigMap{}
					if err := c.Get(ctx, req.NamespacedName, cm); err != nil {
						return ctrl.Result{}, client.IgnoreNotFound(err)
					}
					if cm.Labels["labelled"] == "true" {
						return ctrl.Result{}, nil
					}
					patch := client.MergeFrom(cm.DeepCopy())
					cm.Labels = map[string]string{"labelled": "true"}
					return ctrl.Result{}, c.Patch(ctx, cm, patch)
				}))
		},
	}
}

type reconcilerFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

func TestOperatorsWithTheSameControllersRunSideBySideAndCountTheirWrites(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	first := Start(t, Options{Manager: labeller(scheme), RESTConfig: env.Config})
	// Without the name validation switched off, a second manager with a
	// controller of the same name fails to build.
	second := Start(t, Options{Manager: labeller(scheme), RESTConfig: env.Config})
	second.Stop(t)

	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.CreateNamespace(t, c, "optest")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "labelled"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the ConfigMap is labelled", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
		return err == nil && cm.Labels["labelled"] == "true", err
	})
	if got := first.Writes.Namespace(ns).Count("patch", "configmaps"); got != 1 {
		t.Errorf("the operator's ConfigMap patches in %s = %d, want 1: %s", ns, got, first.Writes.Namespace(ns))
	}
	if got := second.Writes.Total(); got != 0 {
		t.Errorf("the stopped operator wrote %d times: %s", got, second.Writes)
	}
}

func TestRunWithoutAnIdentityFails(t *testing.T) {
	_, err := Run(Options{Manager: manager.Options{Name: "nobody"}})
	if err == nil || !strings.Contains(err.Error(), "RESTConfig is required") {
		t.Fatalf("Run without RESTConfig: %v", err)
	}
}

func TestTuneChangesTheConfiguration(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	var seen manager.Config
	opts := labeller(scheme)
	setup := opts.Setup
	opts.Setup = func(mgr ctrl.Manager, cfg manager.Config) error {
		seen = cfg
		return setup(mgr, cfg)
	}
	Start(t, Options{Manager: opts, RESTConfig: env.Config, Tune: func(c *manager.Config) { c.KubeAPIQPS = 7 }})
	if seen.KubeAPIQPS != 7 || seen.LeaderElect || seen.MaxBackoff != MaxBackoff || !seen.SkipControllerNameValidation {
		t.Errorf("the operator ran with %+v", seen)
	}
}
