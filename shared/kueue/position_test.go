package kueue

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestQueuePositionsCostOneListPerQueuePerRefresh: the jobs of one
// LocalQueue that ask for their positions within the cache's lifetime,
// even all at once, cost one call to the visibility API; each other queue
// costs its own; an expired answer, and an error, are asked again only
// after the lifetime.
func TestQueuePositionsCostOneListPerQueuePerRefresh(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	var mu sync.Mutex
	calls := map[types.NamespacedName]int{}
	fail := false
	q := NewPositions(func(_ context.Context, queue types.NamespacedName) (map[string]int32, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[queue]++
		if fail {
			return nil, errors.New("unavailable")
		}
		return map[string]int32{"wl-" + queue.Name: 1}, nil
	}, 15*time.Second, clk)
	team, other := types.NamespacedName{Namespace: "a", Name: "team"}, types.NamespacedName{Namespace: "a", Name: "other"}

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if got, err := q.Get(t.Context(), team); err != nil || got["wl-team"] != 1 {
				t.Errorf("get: %v %v", got, err)
			}
		})
	}
	wg.Wait()
	if _, err := q.Get(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{team: 1, other: 1}, calls); diff != "" {
		t.Errorf("calls for 50 jobs of team and one of other (-want +got):\n%s", diff)
	}

	clk.SetTime(clk.Now().Add(14 * time.Second))
	_, _ = q.Get(t.Context(), team)
	if calls[team] != 1 {
		t.Errorf("a fresh answer was asked again: %d calls", calls[team])
	}
	clk.SetTime(clk.Now().Add(time.Second))
	fail = true
	for range 5 {
		if _, err := q.Get(t.Context(), team); err == nil {
			t.Error("the error is not returned")
		}
	}
	if calls[team] != 2 {
		t.Errorf("an expired answer: %d calls, want 2; an error is kept like an answer", calls[team])
	}
}

func TestPendingPositionsStartAtOne(t *testing.T) {
	summary := &unstructured.Unstructured{Object: map[string]any{"items": []any{
		map[string]any{"metadata": map[string]any{"name": "a"}, "positionInLocalQueue": int64(0)},
		map[string]any{"metadata": map[string]any{"name": "b"}, "positionInLocalQueue": int64(1)},
		map[string]any{"metadata": map[string]any{"name": "c"}},
		map[string]any{"metadata": map[string]any{"name": "d"}, "positionInLocalQueue": int64(math.MaxInt32)},
		map[string]any{"metadata": map[string]any{"name": "e"}, "positionInLocalQueue": int64(math.MaxInt64)},
	}}}
	if diff := cmp.Diff(map[string]int32{"a": 1, "b": 2}, PendingPositions(summary)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPositionRefreshIsBoundedAndJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 100 {
		d := PositionRefresh(30 * time.Second)
		if d < 30*time.Second || d > 36*time.Second {
			t.Fatalf("refresh %s outside [30s, 36s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Error("no jitter")
	}
}

// TestAHungVisibilityAPIHoldsAQueueForTheTimeoutOnly: a fetch that never
// answers is cut off, its error kept like an answer, so the queue's
// reconciles go on.
func TestAHungVisibilityAPIHoldsAQueueForTheTimeoutOnly(t *testing.T) {
	q := NewPositions(func(ctx context.Context, _ types.NamespacedName) (map[string]int32, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}, time.Minute, clock.RealClock{})
	q.timeout = 50 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := q.Get(t.Context(), types.NamespacedName{Namespace: "team", Name: "hung"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the fetch's deadline", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a hung fetch held the queue for a minute")
	}
}
