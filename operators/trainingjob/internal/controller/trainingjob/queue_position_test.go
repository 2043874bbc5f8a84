package trainingjob

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
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
	q := newQueuePositions(func(_ context.Context, queue types.NamespacedName) (map[string]int32, error) {
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
			if got, err := q.get(t.Context(), team); err != nil || got["wl-team"] != 1 {
				t.Errorf("get: %v %v", got, err)
			}
		})
	}
	wg.Wait()
	if _, err := q.get(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{team: 1, other: 1}, calls); diff != "" {
		t.Errorf("calls for 50 jobs of team and one of other (-want +got):\n%s", diff)
	}

	clk.SetTime(clk.Now().Add(14 * time.Second))
	_, _ = q.get(t.Context(), team)
	if calls[team] != 1 {
		t.Errorf("a fresh answer was asked again: %d calls", calls[team])
	}
	clk.SetTime(clk.Now().Add(time.Second))
	fail = true
	for range 5 {
		if _, err := q.get(t.Context(), team); err == nil {
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
	if diff := cmp.Diff(map[string]int32{"a": 1, "b": 2}, pendingPositions(summary)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPositionRefreshIsBoundedAndJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 100 {
		d := positionRefresh(30 * time.Second)
		if d < 30*time.Second || d > 36*time.Second {
			t.Fatalf("refresh %s outside [30s, 36s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Error("no jitter")
	}
}

// TestQueuedShowsItsPlace: a job waiting in its queue shows its place in
// status and in the Queued condition, or why it is unknown; once admitted
// it has none.
func TestQueuedShowsItsPlace(t *testing.T) {
	for name, tc := range map[string]struct {
		queue       *queueObservation
		running     bool
		wantQueue   *trainingv1alpha1.QueueStatus
		wantMessage string
	}{
		"position known": {
			queue:       &queueObservation{position: ptr.To[int32](2), message: "insufficient quota"},
			wantQueue:   &trainingv1alpha1.QueueStatus{LocalQueue: "team-queue", Position: ptr.To[int32](2)},
			wantMessage: "PyTorchJob mnist-r1 waits for Kueue to admit it from queue team-queue; position 2 in LocalQueue team-queue. Kueue: insufficient quota",
		},
		"position unknown": {
			queue:       &queueObservation{unknown: "position unknown: why"},
			wantQueue:   &trainingv1alpha1.QueueStatus{LocalQueue: "team-queue"},
			wantMessage: "PyTorchJob mnist-r1 waits for Kueue to admit it from queue team-queue; position unknown: why",
		},
		"admitted": {running: true},
	} {
		t.Run(name, func(t *testing.T) {
			tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team-a"}}
			tj.Spec.QueueName = "team-queue"
			tj.Status.Queue = &trainingv1alpha1.QueueStatus{LocalQueue: "team-queue", Position: ptr.To[int32](7)}
			job := specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended))
			if tc.running {
				job = kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning)
			}
			setStatus(tj, observation{kind: "PyTorchJob", jobName: "mnist-r1", run: 1, job: job, queue: tc.queue, now: t0})
			if diff := cmp.Diff(tc.wantQueue, tj.Status.Queue); diff != "" {
				t.Errorf("status.queue (-want +got):\n%s", diff)
			}
			if c := conditions.Get(tj, trainingv1alpha1.ConditionQueued); tc.wantMessage != "" && (c == nil || c.Message != tc.wantMessage) {
				t.Errorf("Queued condition %+v, want message %q", c, tc.wantMessage)
			}
		})
	}
}

// TestAHungVisibilityAPIHoldsAQueueForTheTimeoutOnly: a fetch that never
// answers is cut off, its error kept like an answer, so the queue's
// reconciles go on.
func TestAHungVisibilityAPIHoldsAQueueForTheTimeoutOnly(t *testing.T) {
	q := newQueuePositions(func(ctx context.Context, _ types.NamespacedName) (map[string]int32, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}, time.Minute, clock.RealClock{})
	q.timeout = 50 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := q.get(t.Context(), types.NamespacedName{Namespace: "team", Name: "hung"})
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
