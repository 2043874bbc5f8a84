package featurestore_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func managedStore(ns, name string) *featuresv1alpha1.FeatureStore {
	fs := newStore(ns, name, "managedp").obj()
	fs.Spec.OnlineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	return fs
}

// Hostile or careless objects the API server refuses at admission, with
// the message the user sees.
func TestAdversarialObjectsRejectedAtAdmission(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	long := strings.Repeat("a", 64)
	stores := map[string]struct {
		fs      *featuresv1alpha1.FeatureStore
		wantErr string
	}{
		"oversized name (64 characters)": {
			fs: newStore(ns, long, "valid").obj(), wantErr: "metadata.name must be at most 63 characters",
		},
		"managed server, name of 44 characters": {
			fs: managedStore(ns, strings.Repeat("m", 44)), wantErr: "needs a name of at most 43 characters",
		},
		"managed server, name that is not a DNS-1035 label": {
			fs: managedStore(ns, "1st.store"), wantErr: "needs a name of at most 43 characters",
		},
		"negative storage": {
			fs: func() *featuresv1alpha1.FeatureStore {
				fs := managedStore(ns, "negative")
				fs.Spec.OnlineStore.Managed.Storage = ptrTo(resource.MustParse("-1Gi"))
				return fs
			}(),
			wantErr: "storage must be a positive quantity",
		},
		"zero storage": {
			fs: func() *featuresv1alpha1.FeatureStore {
				fs := managedStore(ns, "zero")
				fs.Spec.OnlineStore.Managed.Storage = ptrTo(resource.MustParse("0"))
				return fs
			}(),
			wantErr: "storage must be a positive quantity",
		},
		"project with a Redis glob (injected key pattern)": {
			fs: newStore(ns, "glob", "sales*").obj(), wantErr: "spec.project",
		},
		"project with SQL": {
			fs: newStore(ns, "sql", "x'; DROP DATABASE postgres; --").obj(), wantErr: "spec.project",
		},
		"project with a newline (injected ACL rule)": {
			fs: newStore(ns, "newline", "p\r\nACL SETUSER evil on").obj(), wantErr: "spec.project",
		},
		"oversized project": {
			fs: newStore(ns, "bigproject", strings.Repeat("p", 10000)).obj(), wantErr: "spec.project",
		},
		"backend name with an injected option": {
			fs: func() *featuresv1alpha1.FeatureStore {
				fs := newStore(ns, "badbackend", "valid")
				fs.fs.Spec.OnlineStore.Backend = "redis,password=x"
				return fs.obj()
			}(),
			wantErr: "spec.onlineStore.backend",
		},
	}
	for name, tc := range stores {
		t.Run("FeatureStore/"+name, func(t *testing.T) {
			err := c.Create(t.Context(), tc.fs, client.DryRunAll)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want Invalid mentioning %q", err, tc.wantErr)
			}
		})
	}
	// The longest names each rule allows are accepted.
	for name, fs := range map[string]*featuresv1alpha1.FeatureStore{
		"shared backends, 63 characters": newStore(ns, strings.Repeat("b", 63), "valid").obj(),
		"managed server, 43 characters":  managedStore(ns, strings.Repeat("m", 43)),
	} {
		t.Run("FeatureStore/accepted: "+name, func(t *testing.T) {
			if err := c.Create(t.Context(), fs, client.DryRunAll); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}

	secret := featuresv1alpha1.AdminSecretReference{Name: "a"}
	backends := map[string]struct {
		spec    featuresv1alpha1.FeatureStoreBackendSpec
		wantErr string
	}{
		"host with injected connection options": {
			spec:    featuresv1alpha1.FeatureStoreBackendSpec{Redis: &featuresv1alpha1.RedisBackend{Host: "r:6379,ssl=false", AdminSecret: secret}},
			wantErr: "spec.redis.host",
		},
		"host with a space": {
			spec:    featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{Host: "db sslmode=disable", AdminSecret: secret}},
			wantErr: "spec.postgresql.host",
		},
		"oversized host": {
			spec:    featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{Host: strings.Repeat("h", 254), AdminSecret: secret}},
			wantErr: "spec.postgresql.host",
		},
		"admin Secret outside the naming rules (path)": {
			spec:    featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{Host: "db", AdminSecret: featuresv1alpha1.AdminSecretReference{Name: "../kube-system/x"}}},
			wantErr: "spec.postgresql.adminSecret.name",
		},
		"port out of range": {
			spec:    featuresv1alpha1.FeatureStoreBackendSpec{Redis: &featuresv1alpha1.RedisBackend{Host: "r", Port: 70000, AdminSecret: secret}},
			wantErr: "spec.redis.port",
		},
		"both kinds (conflicting)": {
			spec: featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{Host: "db", AdminSecret: secret},
				Redis: &featuresv1alpha1.RedisBackend{Host: "r", AdminSecret: secret}},
			wantErr: "set exactly one of spec.postgresql",
		},
	}
	for name, tc := range backends {
		t.Run("FeatureStoreBackend/"+name, func(t *testing.T) {
			b := &featuresv1alpha1.FeatureStoreBackend{ObjectMeta: metav1.ObjectMeta{GenerateName: "adversarial-"}, Spec: tc.spec}
			err := c.Create(t.Context(), b, client.DryRunAll)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want Invalid mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// Hostile or careless objects the API server accepts, and what the
// operator makes of them: never a panic, never adopting or reading
// somebody else's object, always a condition and an event.
func TestAdversarialObjectsGetAConditionNotAPanic(t *testing.T) {
	c := adminClient()
	op := startOperator(t, nil)
	_ = op

	t.Run("credentials Secret created first by the tenant", func(t *testing.T) {
		ns := testenv.CreateNamespace(t, c, "fs")
		planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: featurestore.CredentialsSecretName("planted")},
			StringData: map[string]string{"online": "chosen-by-the-tenant", "offline": "chosen", "registry": "chosen"}}
		if err := c.Create(t.Context(), planted); err != nil {
			t.Fatal(err)
		}
		fs := createStore(t, c, newStore(ns, "planted", "plantedp").obj())
		got := waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, commonv1alpha1.ReasonNameTaken)
		if msg := condMessage(got, commonv1alpha1.ConditionStalled); !strings.Contains(msg, planted.Name) || !strings.Contains(msg, "does not belong to this FeatureStore") {
			t.Errorf("Stalled message %q does not name the foreign Secret", msg)
		}
		testenv.WaitForEvent(t, c, fs, commonv1alpha1.ReasonNameTaken)
		requireUntouched(t, c, planted)
		plan := cleanup.PlanFor(got)
		if ok, _ := redis.UserExists(t.Context(), redisServer(), plan.RedisStore().User); ok {
			t.Error("a Redis user was provisioned with the tenant's password")
		}
		if db, roles, _ := postgres.Exists(t.Context(), pgServer(), plan.PostgresStore(cleanup.KindOffline)); db || len(roles) > 0 {
			t.Error("a database was provisioned with the tenant's password")
		}
		deleteAndWait(t, c, fs)
		requireUntouched(t, c, planted)
	})

	t.Run("credentials Secret labelled as the operator's by the tenant", func(t *testing.T) {
		ns := testenv.CreateNamespace(t, c, "fs")
		planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: featurestore.CredentialsSecretName("labelled"),
			Labels: map[string]string{"app.kubernetes.io/managed-by": featurestore.OperatorName, featurestore.LabelFeatureStore: "labelled"}},
			StringData: map[string]string{"online": "chosen-by-the-tenant"}}
		if err := c.Create(t.Context(), planted); err != nil {
			t.Fatal(err)
		}
		fs := createStore(t, c, newStore(ns, "labelled", "labelledp").obj())
		waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, commonv1alpha1.ReasonNameTaken)
		requireUntouched(t, c, planted)
		deleteAndWait(t, c, fs)
	})

	t.Run("client configuration Secret created first by the tenant", func(t *testing.T) {
		ns := testenv.CreateNamespace(t, c, "fs")
		planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: featurestore.ClientSecretName("client")},
			StringData: map[string]string{commonv1alpha1.FeatureStoreConfigKey: "project: theirs\n"}}
		if err := c.Create(t.Context(), planted); err != nil {
			t.Fatal(err)
		}
		fs := createStore(t, c, newStore(ns, "client", "clientp").obj())
		got := waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, commonv1alpha1.ReasonNameTaken)
		if got.Status.ClientConfig != nil {
			t.Error("status points clients at a Secret the operator does not own")
		}
		requireUntouched(t, c, planted)
		deleteAndWait(t, c, fs)
		requireUntouched(t, c, planted)
	})

	t.Run("managed server's Service created first by the tenant", func(t *testing.T) {
		ns := testenv.CreateNamespace(t, c, "fs")
		planted := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-redis"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "theirs"}}}
		if err := c.Create(t.Context(), planted); err != nil {
			t.Fatal(err)
		}
		fs := createStore(t, c, managedStore(ns, "svc"))
		waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, commonv1alpha1.ReasonNameTaken)
		requireUntouched(t, c, planted)
		deleteAndWait(t, c, fs)
	})

	t.Run("managed server the API rejects (requests above limits)", func(t *testing.T) {
		ns := testenv.CreateNamespace(t, c, "fs")
		fs := managedStore(ns, "rejected")
		fs.Spec.OnlineStore.Managed.Resources = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}
		createStore(t, c, fs)
		got := waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, commonv1alpha1.ReasonChildRejected)
		if msg := condMessage(got, commonv1alpha1.ConditionStalled); !strings.Contains(msg, "must be less than or equal to cpu limit") {
			t.Errorf("Stalled message %q is not the API server's", msg)
		}
		if cond := condMessage(got, commonv1alpha1.ConditionReconciling); cond != "" {
			t.Errorf("Reconciling while stalled: %q", cond)
		}
		testenv.WaitForEvent(t, c, fs, commonv1alpha1.ReasonChildRejected)

		// Fixing the spec is what retries it.
		got.Spec.OnlineStore.Managed.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		if err := c.Update(t.Context(), got); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the StatefulSet is created once the spec is fixed", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rejected-redis"}, &appsv1.StatefulSet{})
			return err == nil, client.IgnoreNotFound(err)
		})
		waitCondition(t, c, fs, commonv1alpha1.ConditionReconciling, metav1.ConditionTrue, featuresv1alpha1.ReasonWaitingForServer)
		deleteAndWait(t, c, fs)
	})
}

// requireUntouched fails when a foreign object was changed, adopted or
// deleted.
func requireUntouched(t *testing.T, c client.Client, want client.Object) {
	t.Helper()
	got := want.DeepCopyObject().(client.Object)
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(want), got); err != nil {
		t.Fatalf("the foreign %s is gone: %v", want.GetName(), err)
	}
	if want.GetResourceVersion() != "" && got.GetResourceVersion() != want.GetResourceVersion() {
		t.Errorf("the foreign %s was written (resourceVersion %s -> %s)", want.GetName(), want.GetResourceVersion(), got.GetResourceVersion())
	}
	if len(got.GetOwnerReferences()) > 0 {
		t.Errorf("the foreign %s was adopted: %v", want.GetName(), got.GetOwnerReferences())
	}
}

func deleteAndWait(t *testing.T, c client.Client, fs *featuresv1alpha1.FeatureStore) {
	t.Helper()
	if err := c.Delete(t.Context(), fs); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, fs)
}
