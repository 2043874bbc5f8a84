package operatortest

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/ml-platform/ml-platform/shared/manager"
)

// Reconciler is what every operator's reconciler offers: it registers
// itself with a manager under the controller options it is given.
type Reconciler interface {
	SetupWithManager(mgr ctrl.Manager, opts controller.Options) error
}

// Controller says how a test operator builds and registers the one
// reconciler an integration test drives, in place of the Setup of
// Options.Manager.
type Controller[R Reconciler] struct {
	// Build makes the reconciler as the operator's cmd/main.go does,
	// with the test's settings; required.
	Build func(mgr ctrl.Manager, cfg manager.Config) (R, error)

	// Tune adjusts the reconciler after Build, before it is registered,
	// such as a shorter deadline or a fake clock; optional.
	Tune func(R)

	// Register registers the reconciler; nil calls its SetupWithManager.
	// A harness that wraps the reconciler or changes its concurrency
	// sets it.
	Register func(mgr ctrl.Manager, r R, opts controller.Options) error
}

// StartController is Start for an operator that runs the reconciler c
// builds. It returns the reconciler with the operator, as tests read its
// client and call it directly.
func StartController[R Reconciler](t testing.TB, opts Options, c Controller[R]) (*Operator, R) {
	t.Helper()
	r := c.setup(&opts)
	op := Start(t, opts)
	return op, *r
}

// RunController is StartController for callers without a test; stop the
// operator with Shutdown.
func RunController[R Reconciler](opts Options, c Controller[R]) (*Operator, R, error) {
	r := c.setup(&opts)
	op, err := Run(opts)
	return op, *r, err
}

// setup sets opts.Manager.Setup to build, tune and register the
// reconciler, and returns where the built reconciler lands: manager.New
// runs Setup before Run returns.
func (c Controller[R]) setup(opts *Options) *R {
	built := new(R)
	opts.Manager.Setup = func(mgr ctrl.Manager, cfg manager.Config) error {
		r, err := c.Build(mgr, cfg)
		if err != nil {
			return err
		}
		if c.Tune != nil {
			c.Tune(r)
		}
		*built = r
		if c.Register != nil {
			return c.Register(mgr, r, cfg.ControllerOptions())
		}
		return r.SetupWithManager(mgr, cfg.ControllerOptions())
	}
	return built
}
