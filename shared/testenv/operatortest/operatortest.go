package operatortest

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// MaxBackoff caps the operators' retry delay in tests, so a test that
// repairs a failing dependency sees the retry within seconds.
const MaxBackoff = 2 * time.Second

// discoveryTimeout bounds the retries of building the manager while the
// API server's discovery does not list a CRD installed just before yet.
const discoveryTimeout = 30 * time.Second

// Options describe the operator under test.
type Options struct {
	// Manager describes the operator as its cmd/main.go does: name,
	// scheme, owned kinds and the Setup that registers its reconcilers.
	Manager manager.Options

	// RESTConfig is who the operator authenticates as, such as a chart's
	// ServiceAccount; required.
	RESTConfig *rest.Config

	// Tune adjusts the manager configuration after the test defaults are
	// set, e.g. the client's QPS.
	Tune func(*manager.Config)
}

// Operator is an operator's manager running in the background.
type Operator struct {
	*testenv.Manager

	// Writes counts every API write the operator makes, its events
	// included. Assertions about one test's objects use its views
	// (Writes.Namespace), as the operator also reconciles what earlier
	// tests left behind.
	Writes *testenv.WriteCounter
}

// Config returns the manager configuration every test runs with: no leader
// election, no metrics or probe listeners, a short retry backoff, and
// several managers allowed in one process. Tests that build a manager
// themselves (benchmarks) start from it too.
func Config(restConfig *rest.Config) manager.Config {
	cfg := manager.DefaultConfig()
	cfg.RESTConfig = restConfig
	cfg.LeaderElect = false
	cfg.MetricsBindAddress = "0"
	cfg.HealthProbeBindAddress = "0"
	cfg.MaxBackoff = MaxBackoff
	cfg.SkipControllerNameValidation = true
	return cfg
}

// Start builds the operator's manager, starts it, waits for its caches and
// stops it when the test ends (or earlier, through Stop).
func Start(t testing.TB, opts Options) *Operator {
	t.Helper()
	op, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Stop(t) })
	return op
}

// Run is Start for callers without a test, such as a harness shared with
// benchmarks; stop the operator with Shutdown.
func Run(opts Options) (*Operator, error) {
	if opts.RESTConfig == nil {
		return nil, errors.New("operatortest: Options.RESTConfig is required")
	}
	writes := testenv.NewWriteCounter()
	cfg := Config(writes.Wrap(opts.RESTConfig))
	if opts.Tune != nil {
		opts.Tune(&cfg)
	}
	mgr, err := newManager(cfg, opts.Manager)
	if err != nil {
		return nil, err
	}
	m, err := testenv.RunManager(mgr)
	if err != nil {
		return nil, err
	}
	return &Operator{Manager: m, Writes: writes}, nil
}

// newManager retries manager.New while it fails for want of a REST
// mapping: right after CRDs are installed (by a chart, say) the API
// server's discovery may not list them yet, and the controllers and the
// label-restricted caches need their mappings. Any other error is final.
func newManager(cfg manager.Config, opts manager.Options) (ctrl.Manager, error) {
	var mgr ctrl.Manager
	var lastErr error
	_ = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, discoveryTimeout, true, func(context.Context) (bool, error) {
		mgr, lastErr = manager.New(cfg, opts)
		return lastErr == nil || !meta.IsNoMatchError(lastErr), nil
	})
	return mgr, lastErr
}
