package featurestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	featurestesting "github.com/ml-platform/ml-platform/apis/features/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/backends"
	fscontroller "github.com/ml-platform/ml-platform/operators/featurestore/internal/controller"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestorebackend"
	"github.com/ml-platform/ml-platform/operators/featurestore/test/dbtest"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

// operatorNamespace holds the admin Secrets and handed-off cleanups.
const operatorNamespace = "featurestore-system"

// Backends every test shares.
const (
	pgBackend    = "pg"
	redisBackend = "redis"
)

var (
	env *testenv.Env
	pg  *dbtest.Postgres
	rs  *dbtest.Redis
)

func TestMain(m *testing.M) {
	testenv.CaptureLogs()
	var err error
	if pg, err = dbtest.StartPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		os.Exit(1)
	}
	if rs, err = dbtest.StartRedis(); err != nil {
		pg.Close()
		fmt.Fprintln(os.Stderr, "starting Redis:", err)
		os.Exit(1)
	}
	code := 1
	defer func() {
		rs.Close()
		pg.Close()
		testenv.ReportLogs(code)
		os.Exit(code)
	}()
	env, err = testenv.Start(testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "..", "..", "charts", "featurestore-operator", "files", "crds")},
		ControllerManager: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return
	}
	defer func() { _ = env.Stop() }()
	if err := setupBackends(); err != nil {
		fmt.Fprintln(os.Stderr, "backends:", err)
		return
	}
	code = m.Run()
	// Whichever tests ran, no credential they created may be in the logs
	// or in any object but a Secret.
	if err := errors.Join(env.VerifyLogs(), scanObjectsForPasswords(context.Background())); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
}

func adminClient() client.Client {
	scheme, err := fscontroller.Scheme()
	if err != nil {
		panic(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	return c
}

func setupBackends() error {
	ctx := context.Background()
	c := adminClient()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "pg-admin"},
			StringData: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "redis-admin"},
			StringData: map[string]string{"username": rs.AdminUser, "password": rs.AdminPassword}},
		featurestesting.MakeBackend(pgBackend).PostgreSQL(pg.Host, int32(pg.Port), "pg-admin").Obj(),
		featurestesting.MakeBackend(redisBackend).Redis(rs.Host, int32(rs.Port), "redis-admin").Obj(),
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// operator is a running featurestore-operator.
type operator struct {
	*operatortest.Operator
	reconciler *featurestore.Reconciler
	backends   *featurestorebackend.Reconciler
}

// startOperator runs the operator as the administrator, in its own
// namespace, watching every namespace.
func startOperator(t *testing.T, tune func(*featurestore.Reconciler)) *operator {
	t.Helper()
	return startScopedOperator(t, env.Config, operatorNamespace, nil, tune)
}

// startScopedOperator runs the operator with the given identity, its own
// namespace, and the namespaces it watches (--watch-namespaces; nil for
// every namespace), as a namespace-scoped install of the chart runs it.
func startScopedOperator(t *testing.T, restConfig *rest.Config, namespace string, watch []string, tune func(*featurestore.Reconciler)) *operator {
	t.Helper()
	op := &operator{}
	opts := &fscontroller.Options{
		Options: featurestore.Options{Namespace: namespace, GracePeriod: time.Hour, DriftInterval: time.Minute,
			Images: featurestore.Images{Postgres: "postgres:15", Redis: "redis:7.0"}},
		Tune: func(r *featurestore.Reconciler, _ *controller.Options) {
			op.reconciler = r
			r.Finalizer.Deadline = 20 * time.Second
			if tune != nil {
				tune(r)
			}
		},
		TuneBackend: func(r *featurestorebackend.Reconciler) { op.backends = r },
	}
	op.Operator = operatortest.Start(t, operatortest.Options{
		Manager: fscontroller.ManagerOptions(opts), RESTConfig: restConfig,
		Tune: func(c *manager.Config) { c.WatchNamespaces = watch },
	})
	// Tests call Reconcile themselves: a reconcile before the admin
	// Secrets' cache synced fails (it cannot tell whether they changed).
	ctx, cancel := context.WithTimeout(t.Context(), testenv.EventuallyTimeout)
	defer cancel()
	if !op.reconciler.WaitForAdminSecrets(ctx) {
		t.Fatal("the admin Secrets' cache did not sync")
	}
	return op
}

// writesFor is the view of the operator's writes that concern one test:
// everything in its namespace ns, and its cluster-scoped backends with
// their events (which land in the default namespace, named after the
// backend). Other tests' objects, which the operator also reconciles,
// stay out of it.
func (op *operator) writesFor(ns string, backendPrefix string) *testenv.WriteView {
	return op.Writes.Matching(func(w testenv.Write) bool {
		switch {
		case ns != "" && w.Namespace == ns:
			return true
		case backendPrefix == "":
			return false
		case strings.HasPrefix(w.Resource, "featurestorebackends"):
			return strings.HasPrefix(w.Name, backendPrefix)
		case w.Resource == "events":
			return strings.HasPrefix(w.Name, backendPrefix)
		}
		return false
	})
}

// stop stops the operator before the test ends, to start another.
func (op *operator) stop(t *testing.T) {
	t.Helper()
	op.Stop(t)
}

func getStore(ctx context.Context, c client.Client, fs *featuresv1alpha1.FeatureStore) (*featuresv1alpha1.FeatureStore, error) {
	got := &featuresv1alpha1.FeatureStore{}
	err := c.Get(ctx, client.ObjectKeyFromObject(fs), got)
	return got, err
}

func requestFor(fs *featuresv1alpha1.FeatureStore) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fs)}
}

func testResolver() *backends.Resolver {
	c := adminClient()
	return &backends.Resolver{Client: c, Secrets: c, Namespace: operatorNamespace}
}

// stopPostgres stops the test PostgreSQL until startPostgres or the end of
// the test.
func stopPostgres(t *testing.T) {
	t.Helper()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Start() })
}

// startPostgres starts the test PostgreSQL again.
func startPostgres(t *testing.T) {
	t.Helper()
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
}
