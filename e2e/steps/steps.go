// Package steps holds the reusable steps of the platform's e2e suites
// (notebooks, featurestores, training, uninstall): a client for the
// platform's kinds, a throw-away namespace that saves its state when the
// test fails, waits on kstatus conditions, and one-shot client pods that run
// a script in one of the platform's images. Every step skips the test
// unless ML_PLATFORM_E2E=1 (cluster.Client), so make test stays
// cluster-free.
package steps

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
)

// Poll is how often the steps look at the cluster. The waits' timeouts are
// bounds, not expectations: the build machines have two shared cores.
const Poll = 2 * time.Second

// ArtifactsEnv names the directory where a failed test saves the state of
// its namespace (make e2e sets it under $E2E_ARTIFACTS).
const ArtifactsEnv = "ML_PLATFORM_E2E_ARTIFACTS"

// Env is what a suite's test talks to.
type Env struct {
	CS kubernetes.Interface
	C  client.Client
	// Dynamic lists any kind, for the artifacts of a failed test.
	Dynamic dynamic.Interface
}

// Scheme knows the built-in kinds and every kind of the platform.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, notebooksv1alpha1.AddToScheme,
		featuresv1alpha1.AddToScheme, trainingv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Connect returns the Env of the cluster under test, or skips the test
// without ML_PLATFORM_E2E=1.
func Connect(t testing.TB) *Env {
	t.Helper()
	cs := cluster.Client(t)
	cfg, err := cluster.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{CS: cs, C: c, Dynamic: d}
}

// Image is the reference hack/images/build.sh gives the Debian image NAME
// of images/ (its tag is images/NAME/tag); suites run in e2e/SUITE.
func Image(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "images", name, "tag"))
	if err != nil {
		t.Fatal(err)
	}
	return "localhost/ml-platform/" + name + ":" + strings.TrimSpace(string(b))
}

// Namespace creates a namespace that enforces the restricted Pod Security
// Standard, as the platform's users' namespaces do. When the test fails,
// its state is logged and saved under $ML_PLATFORM_E2E_ARTIFACTS before the
// namespace is deleted.
func (e *Env) Namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-",
		Labels: map[string]string{
			"app.kubernetes.io/part-of":          "ml-platform-e2e",
			"pod-security.kubernetes.io/enforce": "restricted",
		},
	}}
	created, err := e.CS.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.SaveNamespace(t, created.Name)
		}
		err := e.CS.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", created.Name, err)
		}
	})
	return created.Name
}

// SaveNamespace logs a namespace's pods and events (the test output is in
// the JUnit report) and writes them, with the platform's objects as YAML,
// to $ML_PLATFORM_E2E_ARTIFACTS/TEST/NAMESPACE (Collector.Namespace).
// Secrets are never saved.
func (e *Env) SaveNamespace(t *testing.T, ns string) {
	t.Helper()
	cluster.DumpNamespace(t, e.CS, ns)
	root := os.Getenv(ArtifactsEnv)
	if root == "" {
		return
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"), ns)
	if err := (Collector{CS: e.CS, Dynamic: e.Dynamic}).Namespace(context.Background(), ns, dir); err != nil {
		t.Logf("artifacts: %v", err)
	}
	t.Logf("artifacts of namespace %s saved in %s", ns, dir)
}

// Conditioned is a platform object with kstatus conditions.
type Conditioned interface {
	client.Object
	GetConditions() []metav1.Condition
}

// WaitCondition waits until obj (re-read by its key) has condition typ with
// status; it fails at once when the object reports failed (a condition
// type, e.g. Failed, True) or Stalled=True, with that condition's message:
// a Stalled object makes no progress without a person (kstatus), so
// waiting out the timeout would only hide why.
func (e *Env) WaitCondition(t *testing.T, obj Conditioned, typ string, status metav1.ConditionStatus, failed string, timeout time.Duration) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	err := wait.PollUntilContextTimeout(t.Context(), Poll, timeout, true, func(ctx context.Context) (bool, error) {
		if err := e.C.Get(ctx, key, obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return conditionReached(obj.GetConditions(), obj.GetGeneration(), typ, status, failed)
	})
	if err != nil {
		t.Fatalf("%T %s: waiting for %s=%s: %v; conditions %+v", obj, key, typ, status, err, obj.GetConditions())
	}
}

// conditionReached says whether conds show typ with status for generation,
// and returns an error, which ends the wait, when they show failed or
// Stalled True instead. The awaited condition wins: a TrainingJob awaited
// to be Failed is Stalled too.
func conditionReached(conds []metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, failed string) (bool, error) {
	if c := meta.FindStatusCondition(conds, typ); c != nil && c.Status == status && c.ObservedGeneration == generation {
		return true, nil
	}
	for _, f := range []string{failed, "Stalled"} {
		if f == "" || f == typ {
			continue
		}
		if c := meta.FindStatusCondition(conds, f); c != nil && c.Status == metav1.ConditionTrue {
			return false, fmt.Errorf("%s is True: %s: %s", f, c.Reason, c.Message)
		}
	}
	return false, nil
}

// Until polls cond until it holds, failing the test with what after timeout.
func Until(t *testing.T, what string, timeout time.Duration, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), Poll, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Gone waits until obj no longer exists.
func (e *Env) Gone(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	Until(t, fmt.Sprintf("%T %s to be gone", obj, key), timeout, func(ctx context.Context) (bool, error) {
		err := e.C.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
