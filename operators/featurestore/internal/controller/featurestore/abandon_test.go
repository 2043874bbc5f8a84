package featurestore_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

const abandonAnnotation = "features.mlplatform.dev/abandon-cleanup"

// TestAbandonCleanupNeedsTheVerbAndSaysWhatIsLeft deletes a FeatureStore
// whose PostgreSQL is down, so its cleanup keeps failing. The chart's
// admission policy refuses the abandon annotation from a tenant with the
// aggregated edit role and admits it from an administrator bound to the
// chart's abandon-cleanup ClusterRole; the operator then releases the
// finalizer and names what it left on the servers.
func TestAbandonCleanupNeedsTheVerbAndSaysWhatIsLeft(t *testing.T) {
	c := adminClient()
	ctx := t.Context()
	installChart(t)
	ns := testenv.CreateNamespace(t, c, "fs")
	tenant := tenantClient(t, c, ns, "tenant")
	adminCfg, err := env.AddUser("platform-admin")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-admin-edit"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "platform-admin"}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-admin-abandon"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fs-featurestore-operator-abandon-cleanup"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "platform-admin"}},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := client.New(adminCfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	startOperator(t, nil)
	fs := waitReady(t, c, createStore(t, c, newStore(ns, "stuck", "stuck").obj()))
	plan := cleanup.PlanFor(fs)
	stopPostgres(t)
	t.Cleanup(func() {
		_ = pg.Start()
		// What the test abandoned is removed by hand, as the event asks.
		_, _ = cleanup.Run(context.Background(), testResolver(), plan, true)
	})
	if err := c.Delete(ctx, fs); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, c, fs, commonv1alpha1.ConditionCleanupFailed, metav1.ConditionTrue, commonv1alpha1.ReasonCleanupError)

	abandon := func(as client.Client, opts ...client.PatchOption) error {
		latest, err := getStore(ctx, c, fs)
		if err != nil {
			return err
		}
		base := client.MergeFrom(latest.DeepCopy())
		metav1.SetMetaDataAnnotation(&latest.ObjectMeta, abandonAnnotation, "true")
		return as.Patch(ctx, latest, base, opts...)
	}
	// Admission policies take effect a moment after they are created; a
	// dry run shows when, without the risk of a real patch slipping through.
	testenv.Eventually(t, "the admission policy refuses the tenant", func(context.Context) (bool, error) {
		return apierrors.IsForbidden(abandon(tenant, client.DryRunAll)), nil
	})
	err = abandon(tenant)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "needs the verb abandon-cleanup on featurestores.features.mlplatform.dev") {
		t.Fatalf("the tenant setting %s: %v, want Forbidden naming the verb", abandonAnnotation, err)
	}
	got, err := getStore(ctx, c, fs)
	if err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(got, featurestore.FinalizerName) || got.Annotations[abandonAnnotation] != "" {
		t.Fatalf("the tenant's refused request changed the store: finalizers %v annotations %v", got.Finalizers, got.Annotations)
	}

	if err := abandon(admin); err != nil {
		t.Fatalf("the administrator with the abandon-cleanup verb: %v", err)
	}
	testenv.WaitGone(t, c, fs)
	testenv.WaitForEvent(t, c, fs, "CleanupAbandoned")
	ev := testenv.WaitForEvent(t, c, fs, featurestore.EventLeftBehind)
	// The first, failed attempt removed the online store from the Redis
	// that was up; the PostgreSQL stores could not be checked.
	var want []string
	for _, kind := range []string{cleanup.KindOffline, cleanup.KindRegistry} {
		st := plan.PostgresStore(kind)
		want = append(want, st.Database, st.Logins[0], st.Logins[1])
	}
	for _, w := range want {
		if !strings.Contains(ev.Message, w) {
			t.Errorf("the event does not name %s: %q", w, ev.Message)
		}
	}
	if strings.Contains(ev.Message, plan.RedisStore().User) || !strings.Contains(ev.Message, "not checked") {
		t.Errorf("the event names the removed Redis user or does not say what it could not check: %q", ev.Message)
	}
	if ok, err := redis.UserExists(ctx, redisServer(), plan.RedisStore().User); err != nil || ok {
		t.Errorf("the Redis user, removed by the first attempt, exists: %v %v", ok, err)
	}

	// They really were left behind.
	startPostgres(t)
	for _, kind := range []string{cleanup.KindOffline, cleanup.KindRegistry} {
		if db, roles, err := postgres.Exists(ctx, pgServer(), plan.PostgresStore(kind)); err != nil || !db || len(roles) != 3 {
			t.Errorf("%s: database %v roles %v (%v), want all left behind", kind, db, roles, err)
		}
	}
}
