package kueue

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
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// A queued workload's place in its LocalQueue comes from Kueue's
// visibility API, an aggregated API that Kueue serves with its
// VisibilityOnDemand feature gate: GET .../localqueues/NAME/pendingworkloads
// lists the queue's pending workloads with their positions. No watch
// reports a change of position, so queued objects look again on a timer;
// one answer serves every object of the queue that asks within the
// cache's lifetime, which bounds the cost to about one list per
// LocalQueue per refresh, not one per object. The operators that use it
// need the RBAC rule
// groups=visibility.kueue.x-k8s.io,resources=localqueues/pendingworkloads,verbs=get.

// DefaultPositionRefresh is how often a queued object's position is
// refreshed by default.
const DefaultPositionRefresh = 30 * time.Second

// fetchTimeout bounds one call to Kueue's visibility API.
const fetchTimeout = 10 * time.Second

// positionJitter spreads the refreshes of the objects queued together, so
// that they do not all wake at once.
const positionJitter = 0.2

// PendingLimit is how many pending workloads the visibility API lists by
// default (Kueue's DefaultPendingWorkloadsLimit).
const PendingLimit = 1000

// VisibilityGroupVersion is the visibility API's version that Kueue v0.17
// serves first; visibilityLocalQueues its LocalQueues.
var (
	VisibilityGroupVersion = schema.GroupVersion{Group: "visibility.kueue.x-k8s.io", Version: "v1beta2"}
	visibilityLocalQueues  = VisibilityGroupVersion.WithResource("localqueues")
)

// PositionRefresh is when a queued object looks at its position again:
// the refresh period, stretched by up to positionJitter.
func PositionRefresh(period time.Duration) time.Duration {
	return wait.Jitter(period, positionJitter)
}

// FetchFunc lists the positions of a LocalQueue's pending Workloads by
// Workload name, starting at 1.
type FetchFunc func(ctx context.Context, queue types.NamespacedName) (map[string]int32, error)

// Positions caches each LocalQueue's pending workloads for a lifetime.
// The fetch of one queue runs once at a time: reconciles of the queue's
// objects that arrive meanwhile wait for its answer rather than asking
// again. A fetch is bounded by a timeout (10 s), so that a hung aggregated
// API server holds the queue's reconciles for seconds, not for as long as
// TCP waits.
type Positions struct {
	fetch   FetchFunc
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

// NewPositions is a cache of the answers of fetch, each kept for ttl.
func NewPositions(fetch FetchFunc, ttl time.Duration, clk clock.PassiveClock) *Positions {
	return &Positions{fetch: fetch, ttl: ttl, timeout: fetchTimeout, clock: clk, entries: map[types.NamespacedName]*positionEntry{}}
}

// Get returns the positions in queue, fetching them when the cached
// answer is older than the cache's lifetime. An error is kept like an
// answer, so a failing API is asked once per lifetime too.
func (q *Positions) Get(ctx context.Context, queue types.NamespacedName) (map[string]int32, error) {
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

// Lookup is the place of the Workload named workload in queue, or, when
// there is none to show, why: the position is nil and unknown says why,
// or both are empty when the visibility API answered and does not list
// the Workload (it is being admitted, or it left the queue).
func (q *Positions) Lookup(ctx context.Context, queue types.NamespacedName, workload string) (position *int32, unknown string) {
	positions, err := q.Get(ctx, queue)
	if err != nil {
		return nil, PositionUnknown(err, queue.Name)
	}
	if pos, ok := positions[workload]; ok {
		return &pos, ""
	}
	if len(positions) >= PendingLimit {
		return nil, fmt.Sprintf("position unknown: not among the first %d pending workloads", PendingLimit)
	}
	return nil, ""
}

// entry returns queue's entry, and forgets the queues nobody asked about
// for a while, so that deleted queues do not accumulate.
func (q *Positions) entry(queue types.NamespacedName) *positionEntry {
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

// VisibilityFetch asks Kueue's visibility API, through c, for the pending
// workloads of a LocalQueue. The call names the resource rather than a
// kind: the visibility API's localqueues serve a PendingWorkloadsSummary,
// so no LocalQueue kind maps to them.
func VisibilityFetch(c dynamic.Interface) FetchFunc {
	return func(ctx context.Context, queue types.NamespacedName) (map[string]int32, error) {
		if c == nil {
			return nil, errors.New("no client for Kueue's visibility API")
		}
		summary, err := c.Resource(visibilityLocalQueues).Namespace(queue.Namespace).Get(ctx, queue.Name, metav1.GetOptions{}, "pendingworkloads")
		if err != nil {
			log.FromContext(ctx).V(1).Info("Kueue's visibility API gave no queue positions", "localQueue", queue.String(), "error", err.Error())
			return nil, err
		}
		return PendingPositions(summary), nil
	}
}

// PendingPositions reads a PendingWorkloadsSummary: each Workload's
// positionInLocalQueue, which starts at 0, made to start at 1.
func PendingPositions(summary *unstructured.Unstructured) map[string]int32 {
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

// PositionUnknown explains, for a Queued condition, why the visibility
// API gave no position in queue.
func PositionUnknown(err error, queue string) string {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err) && errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Kind == "localqueue":
		// Kueue answered, and has no such LocalQueue (yet).
		return fmt.Sprintf("position unknown: Kueue knows no LocalQueue %s", queue)
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err):
		return fmt.Sprintf("position unknown: Kueue's visibility API (%s) is not served; Kueue serves it with its VisibilityOnDemand feature gate", VisibilityGroupVersion)
	case apierrors.IsForbidden(err):
		return "position unknown: the operator may not read Kueue's visibility API (localqueues/pendingworkloads)"
	default:
		return "position unknown: Kueue's visibility API answered: " + err.Error()
	}
}
