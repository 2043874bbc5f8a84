package featurestore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	featurestesting "github.com/ml-platform/ml-platform/apis/features/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestorebackend"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// requirePostgresStores fails unless both PostgreSQL stores of the plan
// are on the test server (present) or neither is.
func requirePostgresStores(t *testing.T, plan cleanup.Plan, present bool) {
	t.Helper()
	for _, kind := range []string{cleanup.KindOffline, cleanup.KindRegistry} {
		db, roles, err := postgres.Exists(t.Context(), pgServer(), plan.PostgresStore(kind))
		if err != nil {
			t.Fatal(err)
		}
		if present != db || present != (len(roles) == 3) {
			t.Errorf("%s store: database %v, roles %v; want present=%v", kind, db, roles, present)
		}
	}
}

// Issue 24, defect 3: a store that never reached its server (the named
// backend does not exist, or is of the other kind) created nothing there,
// so deleting its FeatureStore finishes at once; the stores that were
// provisioned are removed as always.
func TestDeletingAStoreThatNeverReachedItsServerFinishesAtOnce(t *testing.T) {
	c := adminClient()
	startOperator(t, nil)
	for name, tc := range map[string]struct {
		online string
		reason string
	}{
		"online backend missing":                 {online: "no-such-backend", reason: commonv1alpha1.ReasonDependencyNotFound},
		"PostgreSQL backend as the online store": {online: pgBackend, reason: featuresv1alpha1.ReasonBackendMismatch},
	} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.CreateNamespace(t, c, "fs")
			b := newStore(ns, "wrong", "wrong")
			b.fs.Spec.OnlineStore.Backend = tc.online
			fs := createStore(t, c, b.obj())
			waitCondition(t, c, fs, featuresv1alpha1.ConditionOnlineStoreReady, metav1.ConditionFalse, tc.reason)
			got := waitCondition(t, c, fs, featuresv1alpha1.ConditionRegistryReady, metav1.ConditionTrue, "")
			if rec := got.Status.Provisioning; rec == nil || rec.OnlineStoreBackend != "" || rec.OfflineStoreBackend != pgBackend || rec.RegistryBackend != pgBackend {
				t.Errorf("provisioning record %+v, want the PostgreSQL stores only", rec)
			}
			plan := cleanup.PlanFor(got)
			requirePostgresStores(t, plan, true)

			if err := c.Delete(t.Context(), fs); err != nil {
				t.Fatal(err)
			}
			testenv.WaitGone(t, c, fs)
			testenv.WaitForEvent(t, c, fs, finalizer.EventCleanupSucceeded)
			if hasEvent(t, c, fs, finalizer.EventCleanupFailed) {
				t.Error("the cleanup failed on the way, although nothing was on the online store's server")
			}
			requirePostgresStores(t, plan, false)
		})
	}
}

// The same state in a namespace being deleted: the store goes with its
// namespace without a hand-off, because nothing of its online store waits
// on a server.
func TestNamespaceDeletionWithAStoreThatNeverReachedItsServer(t *testing.T) {
	c := adminClient()
	startOperator(t, nil)
	ns := testenv.CreateNamespace(t, c, "fs")
	b := newStore(ns, "wrongns", "wrongns")
	b.fs.Spec.OnlineStore.Backend = "no-such-backend"
	fs := createStore(t, c, b.obj())
	waitCondition(t, c, fs, featuresv1alpha1.ConditionRegistryReady, metav1.ConditionTrue, "")
	waitCondition(t, c, fs, featuresv1alpha1.ConditionOnlineStoreReady, metav1.ConditionFalse, commonv1alpha1.ReasonDependencyNotFound)
	if err := c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// Within the finalizer's namespace grace (two minutes), which a
	// failing cleanup would wait out before handing off.
	testenv.Eventually(t, "namespace deletion completes", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})), nil
	})
	err := c.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: featurestore.PendingCleanupName(string(fs.UID))}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a cleanup was handed off (%v), although its store never reached the server", err)
	}
	requirePostgresStores(t, cleanup.PlanFor(fs), false)
}

// Issue 24, missing test: the FeatureStoreBackend of a provisioned store
// goes (an administrator forced it), or comes back as the other kind. The
// store is still on the server, so the cleanup waits with
// CleanupDependencyMissing and keeps the finalizer until the backend is
// back.
func TestCleanupWaitsForTheBackendOfWhatWasProvisioned(t *testing.T) {
	c := adminClient()
	startOperator(t, nil)
	for name, replacement := range map[string]func(redisName, secret string) *featuresv1alpha1.FeatureStoreBackend{
		"backend gone": nil,
		"backend re-created as PostgreSQL": func(redisName, secret string) *featuresv1alpha1.FeatureStoreBackend {
			return featurestesting.MakeBackend(redisName).PostgreSQL(pg.Host, int32(pg.Port), secret).Obj()
		},
	} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.CreateNamespace(t, c, "fs")
			prefix := "gone"
			if replacement != nil {
				prefix = "flip"
			}
			pgName, redisName, secrets := ownBackends(t, c, prefix)
			fs := waitReady(t, c, createStore(t, c, storeOn(ns, "orphan", prefix+"project", pgName, redisName)))
			plan := cleanup.PlanFor(fs)
			original, err := getBackend(t.Context(), c, redisName)
			if err != nil {
				t.Fatal(err)
			}
			forceDeleteBackend(t, c, redisName)
			if replacement != nil {
				if err := c.Create(t.Context(), replacement(redisName, secrets[0].Name)); err != nil {
					t.Fatal(err)
				}
			}

			if err := c.Delete(t.Context(), fs); err != nil {
				t.Fatal(err)
			}
			got := waitCleanupBlocked(t, c, fs, "while the Redis user is on the server")
			if msg := condMessage(got, commonv1alpha1.ConditionCleanupFailed); !strings.Contains(msg, "FeatureStoreBackend "+redisName) {
				t.Errorf("CleanupFailed does not name the backend: %q", msg)
			}
			testenv.WaitForEvent(t, c, fs, finalizer.EventCleanupFailed)
			if ok, err := redis.UserExists(t.Context(), redisServer(), plan.RedisStore().User); err != nil || !ok {
				t.Errorf("the Redis user is gone (%v, %v) although its backend was", ok, err)
			}

			if replacement != nil {
				forceDeleteBackend(t, c, redisName)
			}
			restored := original.DeepCopy()
			restored.ObjectMeta = metav1.ObjectMeta{Name: redisName}
			restored.Status = featuresv1alpha1.FeatureStoreBackendStatus{}
			if err := c.Create(t.Context(), restored); err != nil {
				t.Fatal(err)
			}
			testenv.WaitGone(t, c, fs)
			requireProvisioned(t, plan, false)
		})
	}
}

// forceDeleteBackend deletes a backend and removes its in-use finalizer, as
// an administrator forcing it past the stores that use it would.
func forceDeleteBackend(t *testing.T, c client.Client, name string) {
	t.Helper()
	b, err := getBackend(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "backend "+name+" is gone", func(ctx context.Context) (bool, error) {
		b, err := getBackend(ctx, c, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if controllerutil.RemoveFinalizer(b, featurestorebackend.FinalizerName) {
			if err := c.Update(ctx, b); err != nil && !apierrors.IsConflict(err) {
				return false, err
			}
		}
		return false, nil
	})
}

// failStatusWrites makes the operator's status writes of FeatureStores in
// ns fail when fail says so for the patch's body, and counts the failures.
func failStatusWrites(ns string, fail func(body string) bool, failures *atomic.Int32) func(*featurestore.Reconciler) {
	return func(r *featurestore.Reconciler) {
		r.Client = lossyStatusClient{Client: r.Client, ns: ns, fail: fail, failures: failures}
	}
}

// lossyStatusClient loses the status writes failStatusWrites selects.
type lossyStatusClient struct {
	client.Client
	ns       string
	fail     func(body string) bool
	failures *atomic.Int32
}

func (c lossyStatusClient) Status() client.SubResourceWriter {
	return lossyStatusWriter{SubResourceWriter: c.Client.Status(), c: c}
}

type lossyStatusWriter struct {
	client.SubResourceWriter
	c lossyStatusClient
}

func (w lossyStatusWriter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	// The patch helper writes unstructured objects: the kind says which.
	if obj.GetObjectKind().GroupVersionKind().Kind == "FeatureStore" && obj.GetNamespace() == w.c.ns {
		if body, err := p.Data(obj); err == nil && w.c.fail(string(body)) {
			w.c.failures.Add(1)
			return errors.New("injected: the status write was lost")
		}
	}
	return w.SubResourceWriter.Patch(ctx, obj, p, opts...)
}

// Adversarial: the operator loses its status writes around the creates on
// the servers. The record of what may exist is written before anything is
// created, so a store created on the server whose status write was lost
// is still cleaned up; a store whose record could not be written is never
// created, and its deletion finishes at once.
func TestTheProvisioningRecordPrecedesEveryCreate(t *testing.T) {
	c := adminClient()

	t.Run("status lost after the create", func(t *testing.T) {
		ns := testenv.CreateNamespace(t, c, "fs")
		var failures atomic.Int32
		// Every status write but the record itself: the conditions and
		// the published endpoints of the stores created are lost.
		op := startOperator(t, failStatusWrites(ns, func(body string) bool { return strings.Contains(body, `"conditions"`) }, &failures))
		fs := createStore(t, c, newStore(ns, "lost", "lostproject").obj())
		plan := cleanup.PlanFor(fs)
		testenv.Eventually(t, "the stores exist on the servers", func(ctx context.Context) (bool, error) {
			ok, err := redis.UserExists(ctx, redisServer(), plan.RedisStore().User)
			if err != nil || !ok {
				return false, err
			}
			db, roles, err := postgres.Exists(ctx, pgServer(), plan.PostgresStore(cleanup.KindRegistry))
			return db && len(roles) == 3, err
		})
		testenv.Eventually(t, "the status write after the creates is lost", func(context.Context) (bool, error) {
			return failures.Load() > 0, nil
		})
		got, err := getStore(t.Context(), c, fs)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Conditions) > 0 || got.Status.OnlineStore != nil {
			t.Fatalf("the status writes were not lost: %+v", got.Status)
		}
		op.stop(t)

		startOperator(t, nil)
		if err := c.Delete(t.Context(), fs); err != nil {
			t.Fatal(err)
		}
		testenv.WaitGone(t, c, fs)
		requireProvisioned(t, plan, false)
	})

	t.Run("record lost before the create", func(t *testing.T) {
		ns := testenv.CreateNamespace(t, c, "fs")
		var failures atomic.Int32
		op := startOperator(t, failStatusWrites(ns, func(body string) bool { return strings.Contains(body, `"provisioning"`) }, &failures))
		fs := createStore(t, c, newStore(ns, "norecord", "norecordproject").obj())
		testenv.Eventually(t, "three failed attempts to record", func(context.Context) (bool, error) {
			return failures.Load() >= 3, nil
		})
		plan := cleanup.PlanFor(fs)
		requireProvisioned(t, plan, false)
		op.stop(t)

		startOperator(t, nil)
		if err := c.Delete(t.Context(), fs); err != nil {
			t.Fatal(err)
		}
		testenv.WaitGone(t, c, fs)
		if hasEvent(t, c, fs, finalizer.EventCleanupFailed) {
			t.Error("the cleanup failed, although nothing had been created")
		}
	})
}

// Issue 24, defect 3: the event of an abandoned cleanup names only what
// was recorded as possibly created: not the Redis user of an online store
// whose backend never existed.
func TestAbandonedCleanupNamesOnlyWhatWasProvisioned(t *testing.T) {
	c := adminClient()
	startOperator(t, nil)
	ns := testenv.CreateNamespace(t, c, "fs")
	b := newStore(ns, "abandoned", "abandonedp")
	b.fs.Spec.OnlineStore.Backend = "no-such-backend"
	fs := createStore(t, c, b.obj())
	got := waitCondition(t, c, fs, featuresv1alpha1.ConditionRegistryReady, metav1.ConditionTrue, "")
	plan := cleanup.PlanFor(got)
	stopPostgres(t)
	t.Cleanup(func() {
		_ = pg.Start()
		_, _ = cleanup.Run(context.Background(), testResolver(), cleanup.ProvisionedPlan(got), true)
	})
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, c, fs, commonv1alpha1.ConditionCleanupFailed, metav1.ConditionTrue, "")
	latest, err := getStore(t.Context(), c, fs)
	if err != nil {
		t.Fatal(err)
	}
	patched := latest.DeepCopy()
	metav1.SetMetaDataAnnotation(&patched.ObjectMeta, abandonAnnotation, "true")
	if err := c.Patch(t.Context(), patched, client.MergeFrom(latest)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, fs)
	ev := testenv.WaitForEvent(t, c, fs, featurestore.EventLeftBehind)
	if strings.Contains(ev.Message, plan.RedisStore().User) || strings.Contains(ev.Message, "Redis") {
		t.Errorf("the event names a Redis user that was never created: %q", ev.Message)
	}
	if !strings.Contains(ev.Message, plan.PostgresStore(cleanup.KindOffline).Database) {
		t.Errorf("the event does not name the offline store's database: %q", ev.Message)
	}
}

// Adversarial: the namespace is deleted while a store is half provisioned
// (its PostgreSQL went down after the record, before the create). What
// the record names may exist, so its cleanup is handed off, PostgreSQL
// stores included, and finished once the server is back.
func TestNamespaceDeletedMidProvisioningHandsOffWhatWasRecorded(t *testing.T) {
	c := adminClient()
	startOperator(t, func(r *featurestore.Reconciler) { r.Finalizer.NamespaceGrace = time.Second })
	ns := testenv.CreateNamespace(t, c, "fs")
	stopPostgres(t)
	fs := createStore(t, c, newStore(ns, "half", "halfproject").obj())
	got := waitCondition(t, c, fs, featuresv1alpha1.ConditionOfflineStoreReady, metav1.ConditionFalse, featuresv1alpha1.ReasonServerUnavailable)
	waitCondition(t, c, fs, featuresv1alpha1.ConditionOnlineStoreReady, metav1.ConditionTrue, "")
	if rec := got.Status.Provisioning; rec == nil || rec.OfflineStoreBackend != pgBackend {
		t.Fatalf("provisioning record %+v does not name the offline store's backend", rec)
	}
	plan := cleanup.PlanFor(fs)
	if err := c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "namespace deletion completes", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})), nil
	})
	record := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: operatorNamespace, Name: featurestore.PendingCleanupName(string(fs.UID))}
	if err := c.Get(t.Context(), key, record); err != nil {
		t.Fatalf("the half-provisioned store went without a hand-off: %v", err)
	}
	if !strings.Contains(record.Data["plan.json"], `"off":"`+pgBackend+`"`) {
		t.Errorf("the hand-off does not name the recorded offline store: %s", record.Data["plan.json"])
	}
	startPostgres(t)
	testenv.Eventually(t, "the handed-off cleanup finishes", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, key, &corev1.ConfigMap{})), nil
	})
	requireProvisioned(t, plan, false)
}

// Upgrade: FeatureStores an older operator provisioned have no record.
// Deleted before the new operator ever reconciled them, one whose online
// store's backend never existed goes at once, and one whose status shows
// its online store provisioned waits for the missing backend.
func TestStoresOfAnOlderOperatorAreCleanedUpByTheirStatus(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	legacy := func(name string, onlineProvisioned bool) *featuresv1alpha1.FeatureStore {
		b := newStore(ns, name, name+"p")
		b.fs.Spec.OnlineStore.Backend = "no-such-backend"
		b.fs.Finalizers = []string{featurestore.FinalizerName}
		fs := createStore(t, c, b.obj())
		online := metav1.Condition{Type: featuresv1alpha1.ConditionOnlineStoreReady, Status: metav1.ConditionFalse,
			Reason: commonv1alpha1.ReasonDependencyNotFound, Message: "FeatureStoreBackend not found"}
		if onlineProvisioned {
			fs.Status.OnlineStore = &featuresv1alpha1.ProvisionedStore{Endpoint: "gone:6379", User: "mlp-fs-" + string(fs.UID)}
		}
		fs.Status.Conditions = []metav1.Condition{online}
		for i := range fs.Status.Conditions {
			fs.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
		if err := c.Status().Update(t.Context(), fs); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(t.Context(), fs); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	never := legacy("never", false)
	provisioned := legacy("provisioned", true)
	startOperator(t, nil)

	testenv.WaitGone(t, c, never)
	got := waitCleanupBlocked(t, c, provisioned, "while the provisioned online store's backend is missing")
	patched := got.DeepCopy()
	metav1.SetMetaDataAnnotation(&patched.ObjectMeta, abandonAnnotation, "true")
	if err := c.Patch(t.Context(), patched, client.MergeFrom(got)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, provisioned)
}
