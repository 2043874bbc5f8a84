package operatortest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// labeller is a minimal operator: it labels every ConfigMap it sees
// "labelled".
func labeller(scheme *runtime.Scheme) manager.Options {
	return manager.Options{
		Name:   "labeller-operator",
		Scheme: scheme,
		Setup: func(mgr ctrl.Manager, cfg manager.Config) error {
			return (&marker{Client: mgr.GetClient(), Key: "labelled"}).SetupWithManager(mgr, cfg.ControllerOptions())
		},
	}
}

func TestOperatorsWithTheSameControllersRunSideBySideAndCountTheirWrites(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	first := Start(t, Options{Manager: labeller(scheme), RESTConfig: env.Config})
	// Without the name validation switched off, a second manager with a
	// controller of the same name fails to build.
	second := Start(t, Options{Manager: labeller(scheme), RESTConfig: env.Config})
	second.Stop(t)

	expectOneMark(t, scheme, first, "labelled")
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
