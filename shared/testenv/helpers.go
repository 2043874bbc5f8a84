package testenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventuallyTimeout bounds every Eventually. It is generous because the
// machines that run the tests have two cores shared with the control plane.
const EventuallyTimeout = 60 * time.Second

// Eventually polls cond every 100ms until it returns true, and fails the test
// with what was awaited if it has not after EventuallyTimeout or returned an
// error.
func Eventually(t testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), EventuallyTimeout)
	defer cancel()
	start := time.Now()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	// A slow wait that still succeeds is how a missed watch event or a
	// reconcile that only a periodic requeue rescued shows up: say so.
	if waited := time.Since(start); waited > slowWait {
		t.Logf("waited %s for %s", waited.Round(time.Millisecond), what)
	}
}

// slowWait is how long an Eventually may take before it is logged as slow.
const slowWait = 10 * time.Second

// Consistently checks that check holds (returns nil) for the whole of
// window, polling every 100ms, and fails the test with the first violation
// check reports and when it came. It is the way to assert that something
// does NOT happen: a bare sleep followed by one look passes whenever the
// wrong action comes after the look, and wastes the window when it comes
// early. The window should cover what could cause the violation, such as a
// watch event reaching the reconciler; check is called at least twice, at
// the start and after the window, however slow each call is.
func Consistently(t testing.TB, what string, window time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	if err := consistently(window, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func consistently(window time.Duration, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), window+EventuallyTimeout)
	defer cancel()
	start := time.Now()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for polls := 1; ; polls++ {
		if err := check(ctx); err != nil {
			return fmt.Errorf("violated %s into a %s window (observation %d): %w", time.Since(start).Round(time.Millisecond), window, polls, err)
		}
		if polls >= 2 && time.Since(start) >= window {
			return nil
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return fmt.Errorf("checks took longer than %s: %w", window+EventuallyTimeout, ctx.Err())
		}
	}
}

// Manager is a manager running in the background of a test.
type Manager struct {
	ctrl.Manager
	cancel context.CancelFunc
	done   chan error
}

// StartManager starts mgr, waits for its caches to sync and stops it when
// the test ends (or earlier, through Stop), failing the test if it stopped
// with an error.
func StartManager(t testing.TB, mgr ctrl.Manager) *Manager {
	t.Helper()
	m, err := RunManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(t) })
	return m
}

// RunManager starts mgr and waits for its caches to sync, for callers
// without a test, such as a harness shared with benchmarks; Shutdown stops
// it.
func RunManager(mgr ctrl.Manager) (*Manager, error) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, EventuallyTimeout)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return nil, errors.New("manager caches did not sync")
	}
	return m, nil
}

// Stop stops the manager and waits for it, failing the test if it stopped
// with an error; calling it again does nothing.
func (m *Manager) Stop(t testing.TB) {
	t.Helper()
	if err := m.Shutdown(); err != nil {
		t.Error(err)
	}
}

// Shutdown stops the manager and waits for it; calling it again does
// nothing.
func (m *Manager) Shutdown() error {
	if m.cancel == nil {
		return nil
	}
	m.cancel()
	m.cancel = nil
	select {
	case err := <-m.done:
		if err != nil {
			return fmt.Errorf("manager stopped with error: %w", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("manager did not stop within 30s")
	}
}

// CreateNamespace creates a namespace with a generated name and returns it.
func CreateNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// WaitForEvent waits for an event with the given reason on obj and returns it.
func WaitForEvent(t testing.TB, c client.Client, obj client.Object, reason string) *corev1.Event {
	t.Helper()
	var found *corev1.Event
	Eventually(t, "event "+reason+" on "+obj.GetName(), func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(obj.GetNamespace())); err != nil {
			return false, err
		}
		for i, e := range events.Items {
			if e.InvolvedObject.UID == obj.GetUID() && e.Reason == reason {
				found = &events.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
