package featurestore_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	featurestesting "github.com/ml-platform/ml-platform/apis/features/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestorebackend"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"

	"github.com/ml-platform/ml-platform/operators/featurestore/test/dbtest"
)

// pgBackendFor registers a PostgreSQL backend on the test server with its
// own admin Secret; a nil data leaves the Secret out.
func pgBackendFor(t *testing.T, c client.Client, name string, port int, data map[string]string) *featuresv1alpha1.FeatureStoreBackend {
	t.Helper()
	if data != nil {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: name + "-admin"}, StringData: data}
		if err := c.Create(t.Context(), secret); err != nil {
			t.Fatal(err)
		}
		if p := data["password"]; p != "" {
			seenPasswords.Store(p, "admin Secret "+secret.Name)
		}
	}
	b := featurestesting.MakeBackend(name).PostgreSQL(pg.Host, int32(port), name+"-admin").Obj()
	if err := c.Create(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	return b
}

func getBackend(ctx context.Context, c client.Client, name string) (*featuresv1alpha1.FeatureStoreBackend, error) {
	b := &featuresv1alpha1.FeatureStoreBackend{}
	return b, c.Get(ctx, client.ObjectKey{Name: name}, b)
}

// waitBackend waits until the backend's status describes its generation
// and Ready has the given status and reason, and checks kstatus: Reconciling
// and Stalled are True only when expected, with Ready's reason.
func waitBackend(t *testing.T, c client.Client, name string, ready metav1.ConditionStatus, reason, kstatus string) *featuresv1alpha1.FeatureStoreBackend {
	t.Helper()
	var got *featuresv1alpha1.FeatureStoreBackend
	testenv.Eventually(t, fmt.Sprintf("backend %s Ready=%s/%s", name, ready, reason), func(ctx context.Context) (bool, error) {
		var err error
		if got, err = getBackend(ctx, c, name); err != nil {
			return false, err
		}
		cond := conditions.Get(got, commonv1alpha1.ConditionReady)
		return got.Status.ObservedGeneration == got.Generation && cond != nil && cond.Status == ready && cond.Reason == reason &&
			conditions.IsCurrent(got, commonv1alpha1.ConditionReady), nil
	})
	for _, k := range []string{commonv1alpha1.ConditionReconciling, commonv1alpha1.ConditionStalled} {
		cond := conditions.Get(got, k)
		switch {
		case k == kstatus && (cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != reason):
			t.Errorf("backend %s: %s = %+v, want True/%s", name, k, cond, reason)
		case k != kstatus && cond != nil:
			t.Errorf("backend %s: unexpected %s %+v", name, k, cond)
		}
	}
	return got
}

func randomPassword() string { return rand.Text() }

func TestBackendStatusIsProvenByTheAdminCredentials(t *testing.T) {
	c := adminClient()
	ctx := t.Context()
	super, err := pg.Superuser(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = super.Close(ctx) }()
	weak := randomPassword()
	// rand.Text is base32: nothing to quote in the literal.
	if _, err := super.Exec(ctx, fmt.Sprintf("CREATE ROLE fs_backend_weak LOGIN CREATEDB PASSWORD '%s'", weak)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = super.Exec(context.Background(), "DROP ROLE IF EXISTS fs_backend_weak") })

	op := startOperator(t, nil)
	for name, tc := range map[string]struct {
		port       int
		secret     map[string]string
		wantReady  metav1.ConditionStatus
		wantReason string
		wantKState string
		wantText   string
	}{
		"the documented admin": {
			port: pg.Port, secret: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword},
			wantReady: metav1.ConditionTrue, wantReason: commonv1alpha1.ReasonReconciled, wantText: "privileges FeatureStores need",
		},
		"no admin Secret yet": {
			port: pg.Port, wantReady: metav1.ConditionFalse, wantReason: featuresv1alpha1.ReasonAdminSecretNotFound,
			wantKState: commonv1alpha1.ConditionReconciling, wantText: "Waiting for the admin Secret " + operatorNamespace + "/",
		},
		"a Secret without the password": {
			port: pg.Port, secret: map[string]string{"username": pg.AdminUser},
			wantReady: metav1.ConditionFalse, wantReason: featuresv1alpha1.ReasonAdminSecretInvalid,
			wantKState: commonv1alpha1.ConditionStalled, wantText: `lacks key "username" or "password"`,
		},
		"a wrong password": {
			port: pg.Port, secret: map[string]string{"username": pg.AdminUser, "password": "not-" + pg.AdminPassword},
			wantReady: metav1.ConditionFalse, wantReason: featuresv1alpha1.ReasonAuthenticationFailed,
			wantKState: commonv1alpha1.ConditionStalled, wantText: "refused the admin credentials",
		},
		"an admin without CREATEROLE": {
			port: pg.Port, secret: map[string]string{"username": "fs_backend_weak", "password": weak},
			wantReady: metav1.ConditionFalse, wantReason: featuresv1alpha1.ReasonInsufficientPrivileges,
			wantKState: commonv1alpha1.ConditionStalled, wantText: "lacks CREATEROLE",
		},
		"nobody listening": {
			port: dbtest.UnusedPort(t), secret: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword},
			wantReady: metav1.ConditionFalse, wantReason: featuresv1alpha1.ReasonServerUnavailable,
			wantKState: commonv1alpha1.ConditionReconciling, wantText: "did not answer",
		},
	} {
		t.Run(name, func(t *testing.T) {
			bname := "status-" + strings.ReplaceAll(strings.ToLower(name), " ", "-")
			pgBackendFor(t, c, bname, tc.port, tc.secret)
			got := waitBackend(t, c, bname, tc.wantReady, tc.wantReason, tc.wantKState)
			if msg := conditions.Get(got, commonv1alpha1.ConditionReady).Message; !strings.Contains(msg, tc.wantText) {
				t.Errorf("Ready message %q does not say %q", msg, tc.wantText)
			}
			if !controllerutil.ContainsFinalizer(got, featurestorebackend.FinalizerName) {
				t.Errorf("the in-use finalizer is missing: %v", got.Finalizers)
			}
			reason := "Ready"
			if tc.wantReady != metav1.ConditionTrue {
				reason = tc.wantReason
			}
			testenv.WaitForEvent(t, c, got, reason)
		})
	}

	// The Secret arriving later resumes the backend through the watch on
	// the operator's namespace.
	late := "status-no-admin-secret-yet"
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: late + "-admin"},
		StringData: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword}}); err != nil {
		t.Fatal(err)
	}
	waitBackend(t, c, late, metav1.ConditionTrue, commonv1alpha1.ReasonReconciled, "")

	// Settled backends, whatever their state, cost no writes: not the
	// status, not an event.
	list := &featuresv1alpha1.FeatureStoreBackendList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	// Only this test's backends count: others' stores and backends,
	// being created or deleted meanwhile, legitimately cause writes.
	own := op.writesFor("", "status-")
	op.Writes.Reset()
	for range 3 {
		for _, b := range list.Items {
			// An unreachable server is an error, retried with backoff.
			_, _ = op.backends.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&b)})
		}
	}
	if n := own.Total(); n != 0 {
		t.Errorf("reconciling %d settled backends 3 times wrote %d times: %s %+v", len(list.Items), n, own, own.Writes())
	}

	// kubectl get featurestorebackends shows the columns from the status.
	table := backendTable(t, "status-the-documented-admin")
	want := map[string]any{"Stores": float64(0), "Ready": "True", "Reason": commonv1alpha1.ReasonReconciled, "PostgreSQL": pg.Host}
	for i, col := range table.ColumnDefinitions {
		if w, ok := want[col.Name]; ok {
			if got := table.Rows[0].Cells[i]; got != w {
				t.Errorf("column %s = %v, want %v", col.Name, got, w)
			}
			delete(want, col.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("printer columns missing: %v", want)
	}
}

// backendTable reads one backend as kubectl get prints it.
func backendTable(t *testing.T, name string) *metav1.Table {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet,
		strings.TrimSuffix(env.Config.Host, "/")+"/apis/features.mlplatform.dev/v1alpha1/featurestorebackends/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil || len(table.Rows) != 1 {
		t.Fatalf("not a table of one row (%v): %s", err, body)
	}
	return table
}

func TestDeletingABackendInUseWaitsUntilItsStoresAreCleanedUp(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	const name = "inuse"
	pgBackendFor(t, c, name, pg.Port, map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword})
	waitBackend(t, c, name, metav1.ConditionTrue, commonv1alpha1.ReasonReconciled, "")
	b := newStore(ns, "tenant", "inuse")
	b.fs.Spec.OfflineStore.Backend, b.fs.Spec.Registry.Backend = name, name
	fs := waitReady(t, c, createStore(t, c, b.obj()))
	testenv.Eventually(t, "the backend counts its store", func(ctx context.Context) (bool, error) {
		got, err := getBackend(ctx, c, name)
		return err == nil && ptr.Deref(got.Status.FeatureStores, 0) == 1, err
	})

	backend, err := getBackend(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), backend); err != nil {
		t.Fatal(err)
	}
	var got *featuresv1alpha1.FeatureStoreBackend
	testenv.Eventually(t, "the deletion is blocked and says by whom", func(ctx context.Context) (bool, error) {
		if got, err = getBackend(ctx, c, name); err != nil {
			return false, err
		}
		cond := conditions.Get(got, featuresv1alpha1.ConditionDeletionBlocked)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == featuresv1alpha1.ReasonInUse, nil
	})
	if msg := conditions.Get(got, featuresv1alpha1.ConditionDeletionBlocked).Message; !strings.Contains(msg, ns+"/tenant") {
		t.Errorf("DeletionBlocked does not name the store: %q", msg)
	}
	if ev := testenv.WaitForEvent(t, c, got, "DeletionBlocked"); !strings.Contains(ev.Message, ns+"/tenant") {
		t.Errorf("the event does not name the store: %q", ev.Message)
	}

	// The store's cleanup still reaches the server through the backend,
	// and the backend goes once its last user is gone.
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, fs)
	testenv.Eventually(t, "the backend is gone", func(ctx context.Context) (bool, error) {
		_, err := getBackend(ctx, c, name)
		return apierrors.IsNotFound(err), nil
	})
	plan := cleanup.PlanFor(fs)
	for _, kind := range []string{cleanup.KindOffline, cleanup.KindRegistry} {
		if db, roles, err := postgres.Exists(t.Context(), pgServer(), plan.PostgresStore(kind)); err != nil || db || len(roles) > 0 {
			t.Errorf("%s left behind: database %v roles %v (%v)", kind, db, roles, err)
		}
	}
	testenv.WaitForEvent(t, c, fs, "CleanupSucceeded")
}

// TestVerifyingTLSWithoutACAIsNotReady registers a PostgreSQL backend with
// sslMode verify-ca. No CA certificate can be given to Feast's clients,
// whose libpq would then fail in every pod ("root certificate file ...
// does not exist") even where the operator's own check passes: the
// backend is Stalled saying so, and a store on it is never Ready and
// publishes no configuration.
func TestVerifyingTLSWithoutACAIsNotReady(t *testing.T) {
	c := adminClient()
	startOperator(t, nil)
	const name = "verify-ca"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: name + "-admin"},
		StringData: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword}}
	b := featurestesting.MakeBackend(name).PostgreSQL(pg.Host, int32(pg.Port), secret.Name).Obj()
	b.Spec.PostgreSQL.SSLMode = "verify-ca"
	for _, o := range []client.Object{secret, b} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	got := waitBackend(t, c, name, metav1.ConditionFalse, featuresv1alpha1.ReasonUnverifiableTLS, commonv1alpha1.ConditionStalled)
	if msg := conditions.Get(got, commonv1alpha1.ConditionReady).Message; !strings.Contains(msg, "sslMode verify-ca") || !strings.Contains(msg, "CA certificate") {
		t.Errorf("Ready message %q does not say what is missing", msg)
	}

	ns := testenv.CreateNamespace(t, c, "fs")
	fs := createStore(t, c, featurestesting.MakeFeatureStore(ns, "verified", "verified").Backends(redisBackend, name).Obj())
	fs = waitCondition(t, c, fs, commonv1alpha1.ConditionReady, metav1.ConditionFalse, featuresv1alpha1.ReasonUnverifiableTLS)
	if cond := conditions.Get(fs, commonv1alpha1.ConditionStalled); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("Stalled = %+v, want True", cond)
	}
	if p := fs.Status.Provisioning; fs.Status.ClientConfig != nil || p != nil && (p.OfflineStoreBackend != "" || p.RegistryBackend != "") {
		t.Errorf("a store whose clients cannot verify the server published or provisioned: %+v", fs.Status)
	}
	deleteAndWait(t, c, fs)
}
