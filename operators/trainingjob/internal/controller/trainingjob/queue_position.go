package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// A queued job's place in its LocalQueue comes from Kueue's visibility
// API, an aggregated API that Kueue serves with its VisibilityOnDemand
// feature gate: GET .../localqueues/NAME/pendingworkloads lists the
// queue's pending workloads with their positions. No watch reports a
// change of position, so queued jobs look again on a timer; one answer
// serves every job of the queue that asks within the cache's lifetime,
// which bounds the cost to about one list per LocalQueue per refresh, not
// one per job.

// +kubebuilder:rbac:groups=visibility.kueue.x-k8s.io,resources=localqueues/pendingworkloads,verbs=get

// DefaultQueuePositionRefresh is how often a queued job's position is
// refreshed by default.
const DefaultQueuePositionRefresh = 30 * time.Second

// fetchTimeout bounds one call to Kueue's visibility API.
const fetchTimeout = 10 * time.Second

// positionJitter spreads the refreshes of the jobs queued together, so
// that they do not all wake at once.
const positionJitter = 0.2

// visibilityGroupVersion is the visibility API's version that Kueue v0.17
// serves first; visibilityLocalQueues its LocalQueues.
var (
	visibilityGroupVersion = schema.GroupVersion{Group: "visibility.kueue.x-k8s.io", Version: "v1beta2"}
	visibilityLocalQueues  = visibilityGroupVersion.WithResource("localqueues")
)

// positionRefresh is when a queued job looks at its position again: the
// refresh period, stretched by up to positionJitter.
func positionRefresh(period time.Duration) time.Duration {
	return wait.Jitter(period, positionJitter)
}

// queuePositions caches each LocalQueue's pending workloads for ttl. The
// fetch of one queue runs once at a time: reconciles of the queue's jobs
// that arrive meanwhile wait for its answer rather than asking again. A
// fetch is bounded by fetchTimeout, so that a hung aggregated API server
// holds the queue's reconciles for seconds, not for as long as TCP waits.
type queuePositions struct {
	fetch   func(ctx context.Context, queue types.NamespacedName) (map[string]int32, error)
	ttl     time.Duration
	timeout time.Duration
	clock   clock.PassiveClock

	mu      sync.Mutex
	entries map[types.NamespacedName]*positionEntry
}

// positionEntry is one LocalQueue's last answer: the position of each
// pending Workload by name, starting at 1, or why there is none.
type positionEntry struct {
	mu        sync.Mutex
	fetched   time.Time
	positions map[string]int32
	err       error
}

func newQueuePositions(fetch func(context.Context, types.NamespacedName) (map[string]int32, error), ttl time.Duration, clk clock.PassiveClock) *queuePositions {
	return &queuePositions{fetch: fetch, ttl: ttl, timeout: fetchTimeout, clock: clk, entries: map[types.NamespacedName]*positionEntry{}}
}

// get returns the positions in queue, fetching them when the cached
// answer is older than ttl.
func (q *queuePositions) get(ctx context.Context, queue types.NamespacedName) (map[string]int32, error) {
	e := q.entry(queue)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fetched.IsZero() || q.clock.Since(e.fetched) >= q.ttl {
		fctx, cancel := context.WithTimeout(ctx, q.timeout)
		e.positions, e.err = q.fetch(fctx, queue)
		cancel()
		e.fetched = q.clock.Now()
	}
	return e.positions, e.err
}

// entry returns queue's entry, and forgets the queues nobody asked about
// for a while, so that deleted queues do not accumulate.
func (q *queuePositions) entry(queue types.NamespacedName) *positionEntry {
	q.mu.Lock()
	defer q.mu.Unlock()
	for name, e := range q.entries {
		if e.mu.TryLock() {
			stale := !e.fetched.IsZero() && q.clock.Since(e.fetched) > 10*q.ttl
			e.mu.Unlock()
			if stale {
				delete(q.entries, name)
			}
		}
	}
	e, ok := q.entries[queue]
	if !ok {
		e = &positionEntry{}
		q.entries[queue] = e
	}
	return e
}

// fetchPositions asks Kueue's visibility API for the pending workloads of
// a LocalQueue. The call names the resource rather than a kind: the
// visibility API's localqueues serve a PendingWorkloadsSummary, so no
// LocalQueue kind maps to them.
func (r *Reconciler) fetchPositions(ctx context.Context, queue types.NamespacedName) (map[string]int32, error) {
	if r.Visibility == nil {
		return nil, errors.New("no client for Kueue's visibility API")
	}
	summary, err := r.Visibility.Resource(visibilityLocalQueues).Namespace(queue.Namespace).Get(ctx, queue.Name, metav1.GetOptions{}, "pendingworkloads")
	if err != nil {
		log.FromContext(ctx).V(1).Info("Kueue's visibility API gave no queue positions", "localQueue", queue.String(), "error", err.Error())
		return nil, err
	}
	return pendingPositions(summary), nil
}

// pendingPositions reads a PendingWorkloadsSummary: each Workload's
// positionInLocalQueue, which starts at 0, made to start at 1.
func pendingPositions(summary *unstructured.Unstructured) map[string]int32 {
	items, _, _ := unstructured.NestedSlice(summary.Object, "items")
	out := make(map[string]int32, len(items))
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "metadata", "name")
		pos, found, _ := unstructured.NestedInt64(m, "positionInLocalQueue")
		// A position beyond int32 (no queue holds that many) is dropped
		// rather than wrapped into a small or negative one.
		if name != "" && found && pos >= 0 && pos < math.MaxInt32 {
			out[name] = int32(pos) + 1
		}
	}
	return out
}

// pendingLimit is how many pending workloads the visibility API lists by
// default (Kueue's DefaultPendingWorkloadsLimit).
const pendingLimit = 1000

// positionUnknown explains, for the Queued condition, why the visibility
// API gave no position.
func positionUnknown(err error, queue string) string {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err) && errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Kind == "localqueue":
		// Kueue answered, and has no such LocalQueue (yet).
		return fmt.Sprintf("position unknown: Kueue knows no LocalQueue %s", queue)
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err):
		return fmt.Sprintf("position unknown: Kueue's visibility API (%s) is not served; Kueue serves it with its VisibilityOnDemand feature gate", visibilityGroupVersion)
	case apierrors.IsForbidden(err):
		return "position unknown: the operator may not read Kueue's visibility API (localqueues/pendingworkloads)"
	default:
		return "position unknown: Kueue's visibility API answered: " + err.Error()
	}
}

// observePosition looks up the position of the Workload named workload in
// the job's LocalQueue, and asks to look again after a refresh period:
// only queued jobs come here.
func (r *Reconciler) observePosition(ctx context.Context, s *scope, workload string) time.Duration {
	if r.positions == nil {
		return 0
	}
	queue := types.NamespacedName{Namespace: s.tj.Namespace, Name: s.tj.Spec.QueueName}
	positions, err := r.positions.get(ctx, queue)
	switch {
	case err != nil:
		s.queue.unknown = positionUnknown(err, queue.Name)
	default:
		if pos, ok := positions[workload]; ok {
			s.queue.position = &pos
		} else if len(positions) >= pendingLimit {
			s.queue.unknown = fmt.Sprintf("position unknown: not among the first %d pending workloads", pendingLimit)
		}
	}
	return positionRefresh(r.QueuePositionRefresh)
}
