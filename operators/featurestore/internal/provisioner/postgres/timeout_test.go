package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
)

// holdRoleLock acts out a tenant that logs in with its store's credentials,
// changes its own login role's password to the same value in a transaction
// and leaves it open: the role's row stays locked until the session ends,
// which the returned function does.
func holdRoleLock(t *testing.T, st Store, login Login) func() {
	t.Helper()
	ctx := t.Context()
	// The tenant's session is on another database than the store's, so
	// dropping the store's database (WITH FORCE) does not end it.
	conn, err := Connect(ctx, server(), st.Logins[login.Slot], login.Password, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	end := func() { _ = conn.Close(context.Background()) }
	t.Cleanup(end)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Sessions act as the owner role (RESET ROLE keeps it: it is the
	// login role's default); SET ROLE NONE is back to the login role,
	// which may change its own password.
	for _, sql := range []string{"SET ROLE NONE", "ALTER ROLE " + ident(st.Logins[login.Slot]) + " PASSWORD " + literal(login.Password)} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return end
}

// setTimeouts sets the provisioner's bounds for one test.
func setTimeouts(t *testing.T, lock, statement, operation time.Duration) {
	t.Helper()
	saved := [3]time.Duration{LockTimeout, StatementTimeout, OperationTimeout}
	t.Cleanup(func() { LockTimeout, StatementTimeout, OperationTimeout = saved[0], saved[1], saved[2] })
	LockTimeout, StatementTimeout, OperationTimeout = lock, statement, operation
}

// A transaction a tenant leaves open on its own role must not hold the
// operator's deletion, and with it the operator's worker, forever: Delete
// gives up at the admin session's lock_timeout, or else at the deadline of
// the whole operation, says why, and succeeds once the tenant's session is
// gone.
func TestDeleteGivesUpOnALockATenantHolds(t *testing.T) {
	for name, tc := range map[string]struct {
		lock, statement, operation time.Duration
		wantMessage                string
	}{
		"lock_timeout": {
			lock: 200 * time.Millisecond, statement: time.Minute, operation: time.Minute,
			wantMessage: "another session held a lock",
		},
		"the operation's deadline": {
			lock: time.Minute, statement: time.Minute, operation: time.Second,
			wantMessage: "did not finish within 1s",
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := Names("locked", "store", "uid-locked", "off")
			login := Login{Slot: 0, Password: "lockedPassword123"}
			if err := Ensure(t.Context(), server(), st, login, nil); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = Delete(context.Background(), server(), st) })
			end := holdRoleLock(t, st, login)
			setTimeouts(t, tc.lock, tc.statement, tc.operation)

			done := make(chan error, 1)
			go func() { done <- Delete(context.Background(), server(), st) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				end()
				t.Fatalf("Delete still waited for the tenant's lock after a minute (and returned %v once the tenant's session ended)", <-done)
			}
			if !provisioner.IsTimeout(err) || !strings.Contains(err.Error(), tc.wantMessage) {
				t.Fatalf("Delete while the tenant holds a lock on its role: %v, want a TimeoutError saying %q", err, tc.wantMessage)
			}
			t.Logf("Delete while the tenant holds the lock: %v", err)
			end()
			// The deletion itself may take longer than the test's bounds
			// on a loaded machine.
			setTimeouts(t, time.Minute, time.Minute, 2*time.Minute)
			if err := Delete(t.Context(), server(), st); err != nil {
				t.Fatalf("Delete once the tenant's session ended: %v", err)
			}
			if db, roles, err := Exists(t.Context(), server(), st); err != nil || db || len(roles) > 0 {
				t.Fatalf("left behind: database %v, roles %v (%v)", db, roles, err)
			}
		})
	}
}
