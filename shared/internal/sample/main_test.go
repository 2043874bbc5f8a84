package sample

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = samplev1alpha1.AddToScheme(scheme)
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{"crd"},
		ControllerManager: true,
	}, &env)
}

func adminClient(t *testing.T) client.Client {
	t.Helper()
	return newClient(t, env.Config)
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sample-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// operator is a running manager with the Widget reconciler, talking to the
// test API server through a write counter.
type operator struct {
	reconciler *Reconciler
	mgr        ctrl.Manager
	writes     *testenv.WriteCounter
	cancel     context.CancelFunc
	done       chan error
}

func startOperator(t *testing.T, ext *External, tune func(*Reconciler)) *operator {
	t.Helper()
	op := &operator{writes: testenv.NewWriteCounter(), done: make(chan error, 1)}
	cfg := manager.DefaultConfig()
	cfg.RESTConfig = op.writes.Wrap(env.Config)
	cfg.LeaderElect = false
	cfg.MetricsBindAddress = "0"
	cfg.HealthProbeBindAddress = "0"
	cfg.MaxBackoff = 2 * time.Second
	mgr, err := manager.New(cfg, manager.Options{
		Name:   "sample-operator",
		Scheme: scheme,
		Setup: func(mgr ctrl.Manager, cfg manager.Config) error {
			op.reconciler = NewReconciler(mgr, ext)
			if tune != nil {
				tune(op.reconciler)
			}
			opts := cfg.ControllerOptions()
			// Each test starts its own manager in this one process.
			opts.SkipNameValidation = ptr.To(true)
			return op.reconciler.SetupWithManager(mgr, opts)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	op.mgr = mgr
	ctx, cancel := context.WithCancel(context.Background())
	op.cancel = cancel
	go func() { op.done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("cache did not sync")
	}
	t.Cleanup(func() { op.stop(t) })
	return op
}

func (op *operator) stop(t *testing.T) {
	t.Helper()
	if op.cancel == nil {
		return
	}
	op.cancel()
	op.cancel = nil
	select {
	case err := <-op.done:
		if err != nil {
			t.Errorf("manager stopped with error: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("manager did not stop")
	}
}

// applyManifests creates every object of a multi-document YAML file.
func applyManifests(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
}

func repoRoot() string {
	return filepath.Join("..", "..", "..")
}
