package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
)

// An operation waiting for the server's lock, which another operation on
// the same server holds (a long deletion of another store's keys, say),
// gives up at its bound instead of holding its worker until the other
// finishes, and says what it waited for.
func TestWaitingForTheServerLockEndsAtTheBound(t *testing.T) {
	saved := OperationTimeout
	t.Cleanup(func() { OperationTimeout = saved })
	st := Names("uid-lockwait", "lockwait")
	cleanup(t, st)
	for name, op := range map[string]func(context.Context) error{
		"Ensure": func(ctx context.Context) error { return Ensure(ctx, server(), st, []string{"lockwaitPassword1"}) },
		"Delete": func(ctx context.Context) error { return Delete(ctx, server(), st, true) },
	} {
		t.Run(name, func(t *testing.T) {
			unlock, err := lockServer(t.Context(), server())
			if err != nil {
				t.Fatal(err)
			}
			OperationTimeout = time.Second
			done := make(chan error, 1)
			go func() { done <- op(context.Background()) }()
			select {
			case err = <-done:
				unlock()
			case <-time.After(time.Minute):
				unlock()
				t.Fatalf("%s still waited for the server's lock a minute later (and returned %v once it was free)", name, <-done)
			}
			if !provisioner.IsTimeout(err) || !strings.Contains(err.Error(), "waiting for another operation") {
				t.Fatalf("%s while another operation holds the server's lock: %v, want a TimeoutError saying what it waited for", name, err)
			}
			t.Logf("%s: %v", name, err)
			// The operation itself may take longer than the test's bound
			// on a loaded machine.
			OperationTimeout = saved
			if err := op(t.Context()); err != nil {
				t.Fatalf("%s once the lock is free: %v", name, err)
			}
		})
	}
}
