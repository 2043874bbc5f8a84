package featurestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// ownBackends registers a PostgreSQL and a Redis backend on the test
// servers with admin Secrets of their own, so a test can take those Secrets
// away without touching the backends other tests use. It returns the
// Secrets as created.
func ownBackends(t *testing.T, c client.Client, prefix string) (pgName, redisName string, secrets []*corev1.Secret) {
	t.Helper()
	pgName, redisName = prefix+"-pg", prefix+"-redis"
	secrets = []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: pgName + "-admin"},
			StringData: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: redisName + "-admin"},
			StringData: map[string]string{"username": rs.AdminUser, "password": rs.AdminPassword}},
	}
	objs := []client.Object{
		&featuresv1alpha1.FeatureStoreBackend{ObjectMeta: metav1.ObjectMeta{Name: pgName}, Spec: featuresv1alpha1.FeatureStoreBackendSpec{
			PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{Host: pg.Host, Port: int32(pg.Port), SSLMode: "disable",
				AdminSecret: featuresv1alpha1.AdminSecretReference{Name: pgName + "-admin"}}}},
		&featuresv1alpha1.FeatureStoreBackend{ObjectMeta: metav1.ObjectMeta{Name: redisName}, Spec: featuresv1alpha1.FeatureStoreBackendSpec{
			Redis: &featuresv1alpha1.RedisBackend{Host: rs.Host, Port: int32(rs.Port), ACLFile: ptr.To(true),
				AdminSecret: featuresv1alpha1.AdminSecretReference{Name: redisName + "-admin"}}}},
	}
	for _, s := range secrets {
		objs = append(objs, s.DeepCopy())
	}
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	return pgName, redisName, secrets
}

func storeOn(ns, name, project, pgName, redisName string) *featuresv1alpha1.FeatureStore {
	fs := newStore(ns, name, project).obj()
	fs.Spec.OnlineStore.Backend = redisName
	fs.Spec.OfflineStore.Backend = pgName
	fs.Spec.Registry.Backend = pgName
	return fs
}

// requireProvisioned fails unless every database, role and the Redis user
// of the plan are on the servers (present) or none is (absent).
func requireProvisioned(t *testing.T, plan cleanup.Plan, present bool) {
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
	ok, err := redis.UserExists(t.Context(), redisServer(), plan.RedisStore().User)
	if err != nil {
		t.Fatal(err)
	}
	if ok != present {
		t.Errorf("Redis user %s exists=%v; want %v", plan.RedisStore().User, ok, present)
	}
}

// Issue 11, defect 1: a missing admin Secret is a missing dependency of
// the cleanup, not the absence of what it removes.
func TestCleanupWithoutTheAdminSecretKeepsEverythingUntilItIsBack(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	pgName, redisName, secrets := ownBackends(t, c, "nosecret")
	startOperator(t, nil)
	fs := waitReady(t, c, createStore(t, c, storeOn(ns, "orphan", "orphanproject", pgName, redisName)))
	plan := cleanup.PlanFor(fs)

	for _, s := range secrets {
		if err := c.Delete(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	got := waitCleanupBlocked(t, c, fs, "although nothing was cleaned up")
	msg := condMessage(got, commonv1alpha1.ConditionCleanupFailed)
	for _, s := range secrets {
		if !strings.Contains(msg, s.Name) {
			t.Errorf("CleanupFailed does not name the missing Secret %s: %q", s.Name, msg)
		}
	}
	ev := testenv.WaitForEvent(t, c, fs, finalizer.EventCleanupFailed)
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("CleanupFailed event of type %s", ev.Type)
	}
	requireProvisioned(t, plan, true)
	if hasEvent(t, c, fs, finalizer.EventCleanupSucceeded) {
		t.Fatal("CleanupSucceeded reported while nothing was removed")
	}

	for _, s := range secrets {
		if err := c.Create(t.Context(), s.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitGone(t, c, fs)
	requireProvisioned(t, plan, false)
}

// The other half of the contract: a store whose external resources are
// already gone (removed by hand) finishes its cleanup.
func TestCleanupOfResourcesAlreadyGoneFinishes(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	op := startOperator(t, nil)
	fs := waitReady(t, c, createStore(t, c, newStore(ns, "vanished", "vanished").obj()))
	plan := cleanup.PlanFor(fs)
	// Stopped, the operator cannot restore what is removed by hand.
	op.stop(t)
	if _, err := cleanup.Run(t.Context(), testResolver(), plan, true); err != nil {
		t.Fatal(err)
	}
	requireProvisioned(t, plan, false)
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	startOperator(t, nil)
	testenv.WaitGone(t, c, fs)
	testenv.WaitForEvent(t, c, fs, finalizer.EventCleanupSucceeded)
}

// In a namespace being deleted the FeatureStore goes only after its
// cleanup was handed off to the operator's namespace; while the hand-off
// fails, it stays.
func TestTerminatingNamespaceReleasesTheStoreOnlyAfterTheHandoff(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	pgName, redisName, secrets := ownBackends(t, c, "handoff")
	// The hand-off target does not exist yet, so recording fails.
	handoffNS := "fs-handoff-" + strings.TrimPrefix(ns, "fs-")
	startOperator(t, func(r *featurestore.Reconciler) {
		r.Namespace = handoffNS
		r.Finalizer.NamespaceGrace = time.Second
	})
	fs := waitReady(t, c, createStore(t, c, storeOn(ns, "handoff", "handoffproject", pgName, redisName)))
	plan := cleanup.PlanFor(fs)
	for _, s := range secrets {
		if err := c.Delete(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// The namespace controller cannot finish while the store is there;
	// its NamespaceFinalizersRemaining condition proves it tried after
	// the store's grace period.
	testenv.Eventually(t, "the namespace waits for the store's finalizer", func(ctx context.Context) (bool, error) {
		got := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, got); err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.NamespaceFinalizersRemaining && cond.Status == corev1.ConditionTrue &&
				strings.Contains(cond.Message, featurestore.FinalizerName) {
				return true, nil
			}
		}
		return false, nil
	})
	waitHandoffAttempts(t, fs)
	if _, err := getStore(t.Context(), c, fs); err != nil {
		t.Fatalf("the store went although its hand-off failed: %v", err)
	}

	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: handoffNS}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: handoffNS}})
	})
	testenv.Eventually(t, "namespace deletion completes", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})), nil
	})
	record := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: handoffNS, Name: featurestore.PendingCleanupName(string(fs.UID))}, record); err != nil {
		t.Fatalf("the store was released without its cleanup handed off: %v", err)
	}
	// Nothing was removed: the record is all that remembers these.
	requireProvisioned(t, plan, true)
	_, _ = cleanup.Run(context.Background(), testResolver(), plan, true)
}

// waitHandoffAttempts waits until the operator logged three failed
// hand-offs of fs: the release path ran past the grace period more than
// once while the store stayed.
func waitHandoffAttempts(t *testing.T, fs *featuresv1alpha1.FeatureStore) {
	t.Helper()
	testenv.Eventually(t, "three failed hand-offs", func(context.Context) (bool, error) {
		n := 0
		for _, line := range strings.Split(testenv.Logs.String(), "\n") {
			if strings.Contains(line, "handing off cleanup before the namespace goes") && strings.Contains(line, fs.Namespace) {
				n++
			}
		}
		return n >= 3, nil
	})
}

func hasEvent(t *testing.T, c client.Client, obj client.Object, reason string) bool {
	t.Helper()
	events := &corev1.EventList{}
	if err := c.List(t.Context(), events, client.InNamespace(obj.GetNamespace())); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.UID == obj.GetUID() && e.Reason == reason {
			return true
		}
	}
	return false
}

func condMessage(fs *featuresv1alpha1.FeatureStore, t string) string {
	for _, c := range fs.Status.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}

// Issue 11, defect 2: the key space of a project on a Redis backend
// belongs to the oldest FeatureStore that claims it, whatever users the
// server holds. A second tenant with the same project, created while the
// first store's ACL user is missing, gets a Conflict and no grant, and
// deleting it leaves the first store's keys alone.
func TestSecondTenantNeverGetsAnotherStoresKeySpace(t *testing.T) {
	c := adminClient()
	nsA := testenv.CreateNamespace(t, c, "fs")
	nsB := testenv.CreateNamespace(t, c, "fs")
	// No drift check during the test: the first store's user stays lost.
	startOperator(t, func(r *featurestore.Reconciler) { r.DriftInterval = time.Hour })
	first := waitReady(t, c, createStore(t, c, newStore(nsA, "first", "crosstenant").obj()))
	ctx := t.Context()
	online := onlineClient(t, clientConfig(t, c, first).OnlineStore.ConnectionString)
	const key = "entity-1crosstenant"
	if err := online.HSet(ctx, key, "feature", "tenant A's value").Err(); err != nil {
		t.Fatal(err)
	}
	admin := rs.Admin()
	defer func() { _ = admin.Close() }()
	if err := admin.Do(ctx, "ACL", "DELUSER", cleanup.PlanFor(first).RedisStore().User).Err(); err != nil {
		t.Fatal(err)
	}

	second := createStore(t, c, newStore(nsB, "second", "crosstenant").obj())
	got := waitCondition(t, c, second, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, featuresv1alpha1.ReasonConflict)
	if cond := condMessage(got, featuresv1alpha1.ConditionOnlineStoreReady); !strings.Contains(cond, "created earlier") ||
		strings.Contains(cond, nsA) {
		t.Errorf("OnlineStoreReady message %q should say an earlier store holds the project, without naming it", cond)
	}
	testenv.WaitForEvent(t, c, second, featuresv1alpha1.ReasonConflict)
	if got.Status.ClientConfig != nil {
		t.Error("the losing store published a client configuration")
	}
	plan := cleanup.PlanFor(got)
	if ok, err := redis.UserExists(ctx, redisServer(), plan.RedisStore().User); err != nil || ok {
		t.Fatalf("the losing store has a Redis user (%v, %v)", ok, err)
	}
	creds := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsB, Name: featurestore.CredentialsSecretName("second")}, creds); err != nil {
		t.Fatal(err)
	}
	as := rs.Client(plan.RedisStore().User, string(creds.Data["online"]))
	defer func() { _ = as.Close() }()
	if v, err := as.HGet(ctx, key, "feature").Result(); err == nil || errors.Is(err, goredis.Nil) {
		t.Fatalf("the second tenant reached the first one's key space: %q, %v", v, err)
	}

	if err := c.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, second)
	if v, err := admin.HGet(ctx, key, "feature").Result(); err != nil || v != "tenant A's value" {
		t.Fatalf("deleting the second tenant's store touched the first one's keys: %q, %v", v, err)
	}
}

// The loser takes the key space over once the claimant is gone, and only
// after the claimant's cleanup removed its keys.
func TestTheNextClaimantWaitsForTheFirstStoresCleanup(t *testing.T) {
	c := adminClient()
	nsA := testenv.CreateNamespace(t, c, "fs")
	nsB := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	first := waitReady(t, c, createStore(t, c, newStore(nsA, "first", "handover").obj()))
	online := onlineClient(t, clientConfig(t, c, first).OnlineStore.ConnectionString)
	const key = "entity-2handover"
	if err := online.HSet(t.Context(), key, "feature", "old").Err(); err != nil {
		t.Fatal(err)
	}
	// A project ending in the first one's collides too.
	second := createStore(t, c, newStore(nsB, "second", "prehandover").obj())
	waitCondition(t, c, second, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, featuresv1alpha1.ReasonConflict)

	if err := c.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, c, second)
	as := onlineClient(t, clientConfig(t, c, got).OnlineStore.ConnectionString)
	if n, err := as.Exists(t.Context(), key).Result(); err == nil && n != 0 {
		t.Fatal("the first store's keys were still there when the second got its grant")
	}
	if err := c.Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, got)
}

// TestStoreInTheClustersOwnNamespaceStalls: a FeatureStore in a kube-*
// namespace, where the chart's owned-objects policy refuses the operator
// every write, stalls at once with NamespaceReserved; no credentials are
// written and nothing is provisioned on the servers (this operator runs
// as an administrator here, whom the policy would not stop).
func TestStoreInTheClustersOwnNamespaceStalls(t *testing.T) {
	c := adminClient()
	startOperator(t, nil)
	fs := newStore(metav1.NamespacePublic, "", "reserved").obj()
	fs.Name, fs.GenerateName = "", "reserved-"
	createStore(t, c, fs)
	t.Cleanup(func() { _ = c.Delete(context.Background(), fs) })
	got := waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, commonv1alpha1.ReasonNamespaceReserved)
	if msg := conditions.Get(got, commonv1alpha1.ConditionStalled).Message; !strings.Contains(msg, "create the FeatureStore in another namespace") {
		t.Errorf("Stalled: %q names no remedy", msg)
	}
	testenv.WaitForEvent(t, c, fs, commonv1alpha1.ReasonNamespaceReserved)
	secret := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: fs.Namespace, Name: featurestore.CredentialsSecretName(fs.Name)}, secret); !apierrors.IsNotFound(err) {
		t.Errorf("the credentials Secret in %s: %v, want none", fs.Namespace, err)
	}
}
