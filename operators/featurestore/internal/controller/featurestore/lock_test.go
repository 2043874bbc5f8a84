package featurestore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// A tenant locks its own offline store's login role (it changes the
// password to the same value in a transaction it leaves open) and deletes
// its FeatureStore. The cleanup gives up at the admin session's
// lock_timeout instead of waiting forever: the FeatureStore says that a
// lock was held, another tenant's store is served meanwhile, and the
// deletion finishes once the tenant's session ends.
func TestCleanupGivesUpOnALockTheTenantHolds(t *testing.T) {
	saved := postgres.LockTimeout
	t.Cleanup(func() { postgres.LockTimeout = saved })
	postgres.LockTimeout = 500 * time.Millisecond
	c := adminClient()
	startOperator(t, nil)
	ctx := t.Context()
	fs := waitReady(t, c, createStore(t, c, newStore(testenv.CreateNamespace(t, c, "fs"), "locking", "locking").obj()))

	offline := clientConfig(t, c, fs).OfflineStore
	// On another database than the store's, which its deletion drops
	// WITH (FORCE), ending the sessions there.
	offline.Database = "postgres"
	tenant, err := connectOffline(ctx, offline)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePG(tenant) })
	tx, err := tenant.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// SET ROLE NONE leaves the owner role the store's sessions act as,
	// for the login role, which may change its own password.
	for _, sql := range []string{"SET ROLE NONE", "ALTER ROLE " + pgx.Identifier{offline.User}.Sanitize() + " PASSWORD '" + offline.Password + "'"} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", strings.Fields(sql)[0], err)
		}
	}

	deleteStart := time.Now()
	if err := c.Delete(ctx, fs); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, c, fs, commonv1alpha1.ConditionCleanupFailed, metav1.ConditionTrue, commonv1alpha1.ReasonCleanupError)
	if msg := condMessage(got, commonv1alpha1.ConditionCleanupFailed); !strings.Contains(msg, "another session held a lock") {
		t.Errorf("CleanupFailed does not say that a lock was held: %q", msg)
	}
	if ev := testenv.WaitForEvent(t, c, fs, "CleanupFailed"); !strings.Contains(ev.Message, "another session held a lock") {
		t.Errorf("the CleanupFailed event does not say that a lock was held: %q", ev.Message)
	}
	other := waitReady(t, c, createStore(t, c, newStore(testenv.CreateNamespace(t, c, "fs"), "other", "unrelated").obj()))
	t.Logf("another tenant's store was Ready %v after the deletion started", time.Since(deleteStart).Round(time.Millisecond))

	closePG(tenant)
	testenv.WaitGone(t, c, fs)
	deleteAndWait(t, c, other)
}
