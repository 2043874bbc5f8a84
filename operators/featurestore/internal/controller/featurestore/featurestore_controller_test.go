package featurestore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	featurestesting "github.com/ml-platform/ml-platform/apis/features/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/feastconfig"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// storeBuilder builds FeatureStores on the shared test backends; fs is
// the object built, for fields the wrapper has no setter for.
type storeBuilder struct {
	*featurestesting.FeatureStoreWrapper
	fs *featuresv1alpha1.FeatureStore
}

func newStore(ns, name, project string) *storeBuilder {
	w := featurestesting.MakeFeatureStore(ns, name, project).Backends(redisBackend, pgBackend)
	return &storeBuilder{FeatureStoreWrapper: w, fs: w.Obj()}
}

func (b *storeBuilder) retain() *storeBuilder {
	b.Retain()
	return b
}

func (b *storeBuilder) obj() *featuresv1alpha1.FeatureStore { return b.fs }

// seenPasswords collects every generated password the tests saw, for the
// secret scan that runs last.
var seenPasswords sync.Map

func recordPasswords(t *testing.T, c client.Client, ns string) {
	t.Helper()
	secrets := &corev1.SecretList{}
	if err := c.List(t.Context(), secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			if k != commonv1alpha1.FeatureStoreConfigKey && k != "users.acl" && len(v) > 0 {
				seenPasswords.Store(string(v), s.Namespace+"/"+s.Name+"/"+k)
			}
		}
	}
}

func createStore(t *testing.T, c client.Client, fs *featuresv1alpha1.FeatureStore) *featuresv1alpha1.FeatureStore {
	t.Helper()
	if err := c.Create(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	return fs
}

func waitReady(t *testing.T, c client.Client, fs *featuresv1alpha1.FeatureStore) *featuresv1alpha1.FeatureStore {
	t.Helper()
	var got *featuresv1alpha1.FeatureStore
	defer func() {
		if t.Failed() && got != nil {
			t.Logf("last status of %s: %+v", fs.Name, got.Status)
		}
	}()
	testenv.Eventually(t, "FeatureStore "+fs.Name+" becomes Ready", func(ctx context.Context) (bool, error) {
		var err error
		got, err = getStore(ctx, c, fs)
		if err != nil {
			return false, err
		}
		return conditions.IsTrue(got, commonv1alpha1.ConditionReady) && conditions.IsCurrent(got, commonv1alpha1.ConditionReady) &&
			got.Status.ObservedGeneration == got.Generation, nil
	})
	recordPasswords(t, c, fs.Namespace)
	return got
}

func waitCondition(t *testing.T, c client.Client, fs *featuresv1alpha1.FeatureStore, condType string, status metav1.ConditionStatus, reason string) *featuresv1alpha1.FeatureStore {
	t.Helper()
	var got *featuresv1alpha1.FeatureStore
	testenv.Eventually(t, condType+"="+string(status)+"/"+reason, func(ctx context.Context) (bool, error) {
		var err error
		got, err = getStore(ctx, c, fs)
		if err != nil {
			return false, err
		}
		cond := conditions.Get(got, condType)
		return cond != nil && cond.Status == status && (reason == "" || cond.Reason == reason), nil
	})
	return got
}

// waitCleanupBlocked waits until the deletion of fs waits for a missing
// dependency of its cleanup (CleanupFailed, CleanupDependencyMissing) and
// fails the test, saying why, if the finalizer was released instead.
func waitCleanupBlocked(t *testing.T, c client.Client, fs *featuresv1alpha1.FeatureStore, why string) *featuresv1alpha1.FeatureStore {
	t.Helper()
	got := waitCondition(t, c, fs, commonv1alpha1.ConditionCleanupFailed, metav1.ConditionTrue, commonv1alpha1.ReasonCleanupDependencyMissing)
	if !controllerutil.ContainsFinalizer(got, featurestore.FinalizerName) {
		t.Fatalf("the finalizer was released %s", why)
	}
	return got
}

// clientConfig reads and strictly decodes the published feature_store.yaml.
func clientConfig(t *testing.T, c client.Client, fs *featuresv1alpha1.FeatureStore) feastconfig.RepoConfig {
	t.Helper()
	if fs.Status.ClientConfig == nil {
		t.Fatal("status.clientConfig is not published")
	}
	secret := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: fs.Namespace, Name: fs.Status.ClientConfig.SecretName}, secret); err != nil {
		t.Fatal(err)
	}
	cfg, err := feastconfig.Decode(secret.Data[fs.Status.ClientConfig.Key])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// connectRegistry connects with the registry's SQLAlchemy URL as Feast
// would.
func connectRegistry(ctx context.Context, path string) (*pgx.Conn, error) {
	u, err := url.Parse(path)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "postgresql+psycopg" {
		return nil, errors.New("registry path scheme " + u.Scheme)
	}
	u.Scheme = "postgres"
	return pgx.Connect(ctx, u.String())
}

func connectOffline(ctx context.Context, o feastconfig.OfflineStore) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("sslmode=" + o.SSLMode)
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = o.Host, uint16(o.Port), o.User, o.Password, o.Database
	return pgx.ConnectConfig(ctx, cfg)
}

func onlineClient(t *testing.T, connection string) *goredis.Client {
	t.Helper()
	addr, params, err := feastconfig.ParseRedisConnectionString(connection)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, Username: params["username"], Password: params["password"], Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestCreateProvisionsWorkingIsolatedStores(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	op := startOperator(t, nil)

	sales := waitReady(t, c, createStore(t, c, newStore(ns, "sales", "sales").obj()))
	marketing := waitReady(t, c, createStore(t, c, newStore(ns, "marketing", "marketing").obj()))
	testenv.WaitForEvent(t, c, sales, "Ready")
	for _, cond := range []string{featuresv1alpha1.ConditionOnlineStoreReady, featuresv1alpha1.ConditionOfflineStoreReady, featuresv1alpha1.ConditionRegistryReady} {
		if !conditions.IsTrue(sales, cond) || !conditions.IsCurrent(sales, cond) {
			t.Errorf("%s: %+v", cond, conditions.Get(sales, cond))
		}
	}
	if !controllerutil.ContainsFinalizer(sales, featurestore.FinalizerName) {
		t.Error("the cleanup finalizer is missing")
	}

	ctx := t.Context()
	a, b := clientConfig(t, c, sales), clientConfig(t, c, marketing)
	if a.Project != "sales" || a.Registry.RegistryType != "sql" || a.OnlineStore.Type != "redis" || a.OfflineStore.Type != "postgres" {
		t.Fatalf("unexpected configuration: %+v", a)
	}
	// Every connection in the configuration works as the store's own user.
	reg, err := connectRegistry(ctx, a.Registry.Path)
	if err != nil {
		t.Fatalf("registry path: %v", err)
	}
	if _, err := reg.Exec(ctx, "CREATE TABLE feast_registry (id int)"); err != nil {
		t.Fatalf("creating a table in the registry: %v", err)
	}
	_ = reg.Close(ctx)
	off, err := connectOffline(ctx, a.OfflineStore)
	if err != nil {
		t.Fatalf("offline store: %v", err)
	}
	_ = off.Close(ctx)
	ra := onlineClient(t, a.OnlineStore.ConnectionString)
	if err := ra.HSet(ctx, "\x02entity7sales", "f", "v").Err(); err != nil {
		t.Fatalf("online store: %v", err)
	}

	// The other store's credentials reach none of it.
	bOff := b.OfflineStore
	bOff.Database = a.OfflineStore.Database
	_, err = connectOffline(ctx, bOff)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("marketing's role connecting to sales' offline database: %v, want permission denied", err)
	}
	rb := onlineClient(t, b.OnlineStore.ConnectionString)
	if err := rb.HMGet(ctx, "\x02entity7sales", "f").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("marketing reading sales' key: %v, want NOPERM", err)
	}

	// A project that ends with another's on the same Redis is refused,
	// naming its own project and nothing of the other store, which could
	// be another tenant's.
	presales := createStore(t, c, newStore(ns, "presales", "presales").obj())
	got := waitCondition(t, c, presales, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, featuresv1alpha1.ReasonConflict)
	cond := conditions.Get(got, featuresv1alpha1.ConditionOnlineStoreReady)
	ev := testenv.WaitForEvent(t, c, presales, featuresv1alpha1.ReasonConflict)
	for _, msg := range []string{cond.Message, ev.Message} {
		if cond.Reason != featuresv1alpha1.ReasonConflict || !strings.Contains(msg, `"presales"`) {
			t.Errorf("OnlineStoreReady of presales: %+v", cond)
		}
		for _, leak := range []string{`"sales"`, string(sales.UID), cleanup.PlanFor(sales).RedisStore().User} {
			if strings.Contains(msg, leak) {
				t.Errorf("the Conflict names %s of the other store: %q", leak, msg)
			}
		}
	}

	// A restarted operator reconciles every store from a cold cache;
	// settled stores, Ready or Stalled, cost no writes.
	op.stop(t)
	op2 := startOperator(t, nil)
	for range 5 {
		for _, fs := range []*featuresv1alpha1.FeatureStore{sales, marketing, presales} {
			if _, err := op2.reconciler.Reconcile(ctx, requestFor(fs)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The controller's own initial reconciles must not write either,
	// whenever they come.
	own := op2.writesFor(ns, "")
	testenv.Consistently(t, "a restarted operator leaves settled stores alone", 3*time.Second, func(context.Context) error {
		if n := own.Total(); n != 0 {
			return fmt.Errorf("reconciling settled stores wrote %d times: %s", n, own)
		}
		return nil
	})
}

func TestDeleteRemovesAndRetainKeeps(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	deleted := waitReady(t, c, createStore(t, c, newStore(ns, "deleted", "deleted").obj()))
	kept := waitReady(t, c, createStore(t, c, newStore(ns, "kept", "kept").retain().obj()))

	for _, fs := range []*featuresv1alpha1.FeatureStore{deleted, kept} {
		if err := c.Delete(t.Context(), fs); err != nil {
			t.Fatal(err)
		}
		testenv.WaitGone(t, c, fs)
	}
	testenv.WaitForEvent(t, c, kept, "Retained")
	ctx := t.Context()
	for name, tc := range map[string]struct {
		fs   *featuresv1alpha1.FeatureStore
		want bool
	}{"Delete": {deleted, false}, "Retain": {kept, true}} {
		plan := cleanup.PlanFor(tc.fs)
		for _, kind := range []string{cleanup.KindOffline, cleanup.KindRegistry} {
			db, roles, err := postgres.Exists(ctx, pgServer(), plan.PostgresStore(kind))
			if err != nil {
				t.Fatal(err)
			}
			if db != tc.want || (len(roles) == 3) != tc.want {
				t.Errorf("%s: %s database exists %v, roles %v", name, kind, db, roles)
			}
		}
		user, err := redis.UserExists(ctx, redisServer(), plan.RedisStore().User)
		if err != nil {
			t.Fatal(err)
		}
		if user != tc.want {
			t.Errorf("%s: Redis user exists %v", name, user)
		}
	}
	t.Cleanup(func() {
		plan := cleanup.PlanFor(kept)
		_, _ = cleanup.Run(context.Background(), testResolver(), plan, true)
		releaseRetainedClaim(c, kept)
	})
}

// releaseRetainedClaim deletes the record of a retained claim, as an
// administrator does once the kept keys are gone or handed over.
func releaseRetainedClaim(c client.Client, fs *featuresv1alpha1.FeatureStore) {
	_ = c.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: operatorNamespace, Name: featurestore.RetainedClaimName(string(fs.UID))}})
}

func TestUnmarkedObjectsAreNeverTouched(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	// The operator is not running yet, so the test can take the store's
	// names on the servers before it provisions anything.
	fs := createStore(t, c, newStore(ns, "taken", "taken").obj())
	plan := cleanup.PlanFor(fs)
	ctx := t.Context()
	super, err := pg.Superuser(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = super.Close(ctx) }()
	offline := plan.PostgresStore(cleanup.KindOffline)
	for _, sql := range []string{
		"CREATE ROLE " + pgx.Identifier{offline.Database}.Sanitize() + " LOGIN PASSWORD 'theirs'",
		"CREATE DATABASE " + pgx.Identifier{offline.Database}.Sanitize() + " OWNER " + pgx.Identifier{offline.Database}.Sanitize(),
	} {
		if _, err := super.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	admin := rs.Admin()
	defer func() { _ = admin.Close() }()
	if err := admin.Do(ctx, "ACL", "SETUSER", plan.RedisStore().User, "on", ">theirs", "~*", "+@read").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = super.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{offline.Database}.Sanitize())
		_, _ = super.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{offline.Database}.Sanitize())
		_ = admin.Do(context.Background(), "ACL", "DELUSER", plan.RedisStore().User).Err()
	})

	startOperator(t, nil)
	got := waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, featuresv1alpha1.ReasonConflict)
	for _, cond := range []string{featuresv1alpha1.ConditionOnlineStoreReady, featuresv1alpha1.ConditionOfflineStoreReady} {
		if c := conditions.Get(got, cond); c == nil || c.Reason != featuresv1alpha1.ReasonConflict {
			t.Errorf("%s: %+v, want Conflict", cond, c)
		}
	}
	if err := c.Delete(ctx, fs); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, fs)
	testenv.WaitForEvent(t, c, fs, "CleanupConflict")
	db, roles, err := postgres.Exists(ctx, pgServer(), offline)
	if err != nil {
		t.Fatal(err)
	}
	if !db || len(roles) != 1 || roles[0] != offline.Database {
		t.Errorf("their database or role was touched: database %v roles %v", db, roles)
	}
	theirs := rs.Client(plan.RedisStore().User, "theirs")
	defer func() { _ = theirs.Close() }()
	if err := theirs.Get(ctx, "anything").Err(); !errors.Is(err, goredis.Nil) {
		t.Errorf("their Redis user was touched: %v", err)
	}
	// The registry, which was ours, is gone.
	if db, _, _ := postgres.Exists(ctx, pgServer(), plan.PostgresStore(cleanup.KindRegistry)); db {
		t.Error("our registry database was left behind")
	}
}

func TestServerDownDuringDeleteKeepsFinalizerUntilItIsBack(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	other := waitReady(t, c, createStore(t, c, newStore(ns, "bystander", "bystander").obj()))
	fs := waitReady(t, c, createStore(t, c, newStore(ns, "outage", "outage").obj()))

	stopPostgres(t)
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, c, fs, commonv1alpha1.ConditionCleanupFailed, metav1.ConditionTrue, commonv1alpha1.ReasonCleanupError)
	if !controllerutil.ContainsFinalizer(got, featurestore.FinalizerName) {
		t.Fatal("the finalizer was released while the server is down")
	}
	ev := testenv.WaitForEvent(t, c, fs, "CleanupFailed")
	if !strings.Contains(ev.Message, "PostgreSQL") {
		t.Errorf("the event does not say why: %q", ev.Message)
	}
	startPostgres(t)
	testenv.WaitGone(t, c, fs)
	plan := cleanup.PlanFor(fs)
	for _, kind := range []string{cleanup.KindOffline, cleanup.KindRegistry} {
		if db, roles, _ := postgres.Exists(t.Context(), pgServer(), plan.PostgresStore(kind)); db || len(roles) > 0 {
			t.Errorf("%s left behind: %v %v", kind, db, roles)
		}
	}
	// Nothing else was dropped.
	bystander := cleanup.PlanFor(other).PostgresStore(cleanup.KindOffline)
	if db, roles, _ := postgres.Exists(t.Context(), pgServer(), bystander); !db || len(roles) != 3 {
		t.Errorf("another store's database was touched: %v %v", db, roles)
	}
}

func TestRedisRestartAndDriftRestoreTheUser(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, func(r *featurestore.Reconciler) { r.DriftInterval = time.Second })
	fs := waitReady(t, c, createStore(t, c, newStore(ns, "restart", "restart").obj()))
	cfg := clientConfig(t, c, fs)
	ctx := t.Context()

	if err := rs.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	if err := onlineClient(t, cfg.OnlineStore.ConnectionString).Ping(ctx).Err(); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	// A user lost without the aclfile (or removed by hand) comes back at
	// the next drift check.
	admin := rs.Admin()
	defer func() { _ = admin.Close() }()
	if err := admin.Do(ctx, "ACL", "DELUSER", cleanup.PlanFor(fs).RedisStore().User).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the operator restores the user", func(ctx context.Context) (bool, error) {
		return onlineClient(t, cfg.OnlineStore.ConnectionString).Ping(ctx).Err() == nil, nil
	})
}

func TestRotationKeepsOldCredentialsThroughTheGracePeriod(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	// The grace period runs on the operator's clock, which the test
	// advances, so no assertion depends on how fast the machine is.
	clock := clocktesting.NewFakeClock(time.Now())
	grace := time.Hour
	op := startOperator(t, func(r *featurestore.Reconciler) {
		r.GracePeriod = grace
		r.Clock = clock
	})
	fs := waitReady(t, c, createStore(t, c, newStore(ns, "rotating", "rotating").obj()))
	old := clientConfig(t, c, fs)
	ctx := t.Context()

	latest, err := getStore(ctx, c, fs)
	if err != nil {
		t.Fatal(err)
	}
	patchFrom := client.MergeFrom(latest.DeepCopy())
	metav1.SetMetaDataAnnotation(&latest.ObjectMeta, featuresv1alpha1.AnnotationRotateCredentials, "1")
	if err := c.Patch(ctx, latest, patchFrom); err != nil {
		t.Fatal(err)
	}
	var next feastconfig.RepoConfig
	testenv.Eventually(t, "the client configuration carries new credentials", func(ctx context.Context) (bool, error) {
		got, err := getStore(ctx, c, fs)
		if err != nil {
			return false, err
		}
		next = clientConfig(t, c, got)
		return next.OfflineStore.Password != old.OfflineStore.Password, nil
	})
	recordPasswords(t, c, ns)
	testenv.WaitForEvent(t, c, fs, "CredentialsRotated")
	if next.OnlineStore.ConnectionString == old.OnlineStore.ConnectionString || next.Registry.Path == old.Registry.Path {
		t.Fatal("not every store got new credentials")
	}
	requireLogins(t, "new credentials", next)
	requireLogins(t, "old credentials during the grace period", old)
	clock.Step(grace + time.Minute)
	waitRevoked(t, op, fs, old)
	requireLogins(t, "new credentials after the grace period", next)
}

func closePG(c *pgx.Conn) {
	if c != nil {
		_ = c.Close(context.Background())
	}
}

func TestTerminatingNamespaceNeverDeadlocks(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, func(r *featurestore.Reconciler) { r.Finalizer.NamespaceGrace = 2 * time.Second })
	fs := waitReady(t, c, createStore(t, c, newStore(ns, "doomed", "doomed").obj()))

	stopPostgres(t)
	if err := c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "namespace deletion completes", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})), nil
	})
	pending := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: operatorNamespace, Name: featurestore.PendingCleanupName(string(fs.UID))}
	if err := c.Get(t.Context(), key, pending); err != nil {
		t.Fatalf("the cleanup was not handed off: %v", err)
	}
	for _, p := range []string{pg.AdminPassword} {
		if strings.Contains(pending.Data[claims.PlanKey], p) {
			t.Fatal("the handed-off plan holds a password")
		}
	}
	startPostgres(t)
	testenv.Eventually(t, "the handed-off cleanup finishes", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, key, &corev1.ConfigMap{})), nil
	})
	plan := cleanup.PlanFor(fs)
	for _, kind := range []string{cleanup.KindOffline, cleanup.KindRegistry} {
		if db, roles, _ := postgres.Exists(t.Context(), pgServer(), plan.PostgresStore(kind)); db || len(roles) > 0 {
			t.Errorf("%s left behind: %v %v", kind, db, roles)
		}
	}
	if ok, _ := redis.UserExists(t.Context(), redisServer(), plan.RedisStore().User); ok {
		t.Error("the Redis user was left behind")
	}
}

func pgServer() postgres.Server {
	return postgres.Server{Host: pg.Host, Port: pg.Port, AdminDatabase: "postgres", SSLMode: "disable", AdminUser: pg.AdminUser, AdminPassword: pg.AdminPassword}
}

func redisServer() redis.Server {
	return redis.Server{Host: rs.Host, Port: rs.Port, ACLFile: true, AdminUser: rs.AdminUser, AdminPassword: rs.AdminPassword}
}
