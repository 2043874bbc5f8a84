package phase

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/patch"
	"github.com/ml-platform/ml-platform/shared/requeue"
)

// Object is what a Runner reconciles: an API object whose status carries
// conditions.
type Object interface {
	client.Object
	conditions.Object
}

// Result is what a phase asks of the Runner.
type Result struct {
	// RequeueAfter asks for another reconcile after this long; the Runner
	// keeps the shortest non-zero request of all phases.
	RequeueAfter time.Duration
	// Stop ends the reconcile after this phase: later phases do not run,
	// status is still written.
	Stop bool
}

// Phase is one named step of a reconcile over its scope S: what the
// reconcile's phases share, which holds the object being reconciled. Run
// changes the object's status in memory and converges children; it never
// writes the object itself.
type Phase[S any] struct {
	Name string
	Run  func(ctx context.Context, s S) (Result, error)
	// StopIfStalled ends the reconcile after this phase when the object's
	// Stalled condition is True: later phases need what this one found
	// missing.
	StopIfStalled bool
	// Always runs this phase even after the Runner's Halt skipped the ones
	// before it: the status, which adds up what the others found.
	Always bool
}

// Step adapts a step that answers with a controller-runtime result to a
// Phase; its RequeueAfter and error reach the Runner unchanged.
func Step[S any](name string, run func(context.Context, S) (ctrl.Result, error)) Phase[S] {
	return Phase[S]{Name: name, Run: func(ctx context.Context, s S) (Result, error) {
		res, err := run(ctx, s)
		return Result{RequeueAfter: res.RequeueAfter}, err
	}}
}

// Runner runs a controller's phases and writes the result. A reconciler
// builds its Runner once, in SetupWithManager; what one reconcile learns
// lives in the scope passed to Run, so Run may be called concurrently.
type Runner[T Object, S any] struct {
	// Controller names the controller in metrics.
	Controller string
	Client     client.Client
	// APIReader reads from the API server directly; patch.Helper uses it
	// after a conflict.
	APIReader client.Reader
	Recorder  record.EventRecorder
	// Clock times the phases; nil means the real clock.
	Clock   clock.PassiveClock
	Metrics *Metrics
	Phases  []Phase[S]
	// ObservedGeneration returns the status field that records the
	// generation the status was computed for, which the Runner sets before
	// the write; nil (the func or its result) when the kind has none or this
	// reconcile computed no status (the conditions still carry
	// observedGeneration).
	ObservedGeneration func(s S) *int64
	// Halt, when set, is asked after each phase with its error whether the
	// later phases are left without what they need (a failure they build
	// on, an object that cannot progress). From then on only the phases
	// marked Always run. Unlike a Stop, the status is still computed.
	Halt func(s S, err error) bool
	// Events are the events of one reconcile, from the scope and the object
	// as read (before) and as written (after). The Runner records them
	// after a successful write (or when nothing needed writing), so a
	// change is reported only once it is persisted. Nil means the
	// Transitions() of the conditions.
	Events func(s S, before, after T) []Event
	// AfterWrite, when set, runs after a successful write (or when nothing
	// needed writing) and after the events, with the object as the
	// reconcile read it; statusWritten says whether status changed. It is
	// where a controller records metrics of what it persisted.
	AfterWrite func(s S, before, after T, statusWritten bool)
	// ErrorEventAfter is how long phases may keep failing before the
	// error is recorded as a Warning event (ReconcileError) on the object:
	// an error the status does not explain (the API server refusing a
	// Service for an exhausted IP range, a Forbidden write) is otherwise
	// only in the operator's log, and the user sees a resource that does
	// not progress, with no reason. Errors that resolve themselves
	// (conflicts, a cache behind an object just created) never last that
	// long. Zero means DefaultErrorEventAfter; a negative value turns the
	// events off.
	ErrorEventAfter time.Duration

	failing failingObjects
}

// DefaultErrorEventAfter is Runner.ErrorEventAfter's default: longer than
// the few retries a transient error takes (controller-runtime retries
// after 5 ms, doubling), shorter than a user's patience.
const DefaultErrorEventAfter = 30 * time.Second

// ReasonReconcileError is the reason of the Warning event that reports a
// lasting reconcile error.
const ReasonReconcileError = "ReconcileError"

// maxEventMessage bounds the message of a ReconcileError event; the API
// server's own limit is 1 KiB for the message of an events.k8s.io event.
const maxEventMessage = 1000

// maxFailingObjects bounds the objects whose errors a Runner tracks: an
// object deleted while it failed is never reconciled again to end its
// entry, and a flood of failing objects must not grow the map without end.
// Beyond it the object that failed least recently is forgotten (see
// failingObjects.failed), so that a new failure is always tracked.
const maxFailingObjects = 10000

// Run runs every phase in order on the scope s of obj, then writes obj's
// metadata and status once, only where they changed, and then records the
// reconcile's events. A failing phase does not stop the later ones (their
// effects are independent) unless Halt says so; the errors are joined and
// returned without a RequeueAfter, which controller-runtime would ignore.
func (r *Runner[T, S]) Run(ctx context.Context, obj T, s S) (ctrl.Result, error) {
	h, err := patch.NewHelper(obj, r.Client, r.APIReader)
	if err != nil {
		return ctrl.Result{}, err
	}
	before, ok := obj.DeepCopyObject().(T)
	if !ok {
		return ctrl.Result{}, fmt.Errorf("phase: %T copies to another type", obj)
	}
	res, phaseErr := r.runPhases(ctx, obj, s)
	conditions.KeepTransitionTimes(before.GetConditions(), obj)
	if r.ObservedGeneration != nil {
		if g := r.ObservedGeneration(s); g != nil {
			*g = obj.GetGeneration()
		}
	}
	written, err := h.Patch(ctx, obj)
	if apierrors.IsNotFound(err) {
		// Deleted while we reconciled: nothing is left to write or report.
		r.reportLastingError(obj, nil)
		return ctrl.Result{}, nil
	}
	if err != nil {
		err = errors.Join(phaseErr, err)
		r.reportLastingError(obj, err)
		return ctrl.Result{}, err
	}
	r.recordEvents(s, before, obj)
	r.reportLastingError(obj, phaseErr)
	if r.AfterWrite != nil {
		r.AfterWrite(s, before, obj, written.StatusPatched)
	}
	if phaseErr != nil {
		return ctrl.Result{}, phaseErr
	}
	return ctrl.Result{RequeueAfter: res.RequeueAfter}, nil
}

func (r *Runner[T, S]) runPhases(ctx context.Context, obj T, s S) (Result, error) {
	var (
		res    ctrl.Result
		errs   []error
		halted bool
	)
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	for _, p := range r.Phases {
		if halted && !p.Always {
			continue
		}
		start := clk.Now()
		pr, err := p.Run(ctx, s)
		if r.Metrics != nil {
			r.Metrics.duration.WithLabelValues(r.Controller, p.Name).Observe(clk.Since(start).Seconds())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
		res = requeue.Shortest(res, ctrl.Result{RequeueAfter: pr.RequeueAfter})
		if pr.Stop || (p.StopIfStalled && conditions.IsTrue(obj, commonv1alpha1.ConditionStalled)) {
			break
		}
		halted = halted || (r.Halt != nil && r.Halt(s, err))
	}
	return Result{RequeueAfter: res.RequeueAfter}, errors.Join(errs...)
}

func (r *Runner[T, S]) recordEvents(s S, before, after T) {
	if r.Recorder == nil {
		return
	}
	var events []Event
	if r.Events != nil {
		events = r.Events(s, before, after)
	} else {
		events = Transitions()(before.GetConditions(), after.GetConditions())
	}
	for _, e := range events {
		r.Recorder.Event(after, e.Type, e.Reason, e.Message)
	}
}

// failingObjects tracks, per object, since when its reconciles fail and
// which error was last reported, in the order the objects last failed.
type failingObjects struct {
	mu      sync.Mutex
	objects map[string]*list.Element
	// order holds the *failing entries, the least recently failed first.
	order list.List
}

type failing struct {
	key      string
	since    time.Time
	reported string
}

// failed records a failure of the object key at now and returns its entry,
// or nil when the object was not failing before. When maxFailingObjects
// are tracked already it forgets the object that failed least recently:
// most likely one deleted while it failed, which no reconcile will ever
// forget, and an object that still fails only starts its clock again. An
// object that keeps failing is retried at least every few minutes (the
// workqueue's backoff is bounded), so it is forgotten only in a flood of
// thousands of newer failures. The caller holds mu.
func (f *failingObjects) failed(key string, now time.Time) *failing {
	if e, ok := f.objects[key]; ok {
		f.order.MoveToBack(e)
		return e.Value.(*failing)
	}
	if len(f.objects) >= maxFailingObjects {
		oldest := f.order.Front()
		f.order.Remove(oldest)
		delete(f.objects, oldest.Value.(*failing).key)
	}
	if f.objects == nil {
		f.objects = map[string]*list.Element{}
	}
	f.objects[key] = f.order.PushBack(&failing{key: key, since: now})
	return nil
}

// forget ends the object key's entry. The caller holds mu.
func (f *failingObjects) forget(key string) {
	if e, ok := f.objects[key]; ok {
		f.order.Remove(e)
		delete(f.objects, key)
	}
}

// reportLastingError records a Warning event when the phases of obj have
// failed for ErrorEventAfter without a successful reconcile in between, and
// again when the error changes; a success forgets the failure. Conflicts
// and a context cancelled by the manager's stop are neither a failure nor a
// success: they resolve at the next attempt. Neither are the errors of an
// API server that is down, restarting or overloaded: every object fails
// alike then, the event could not be written, and the outage is the
// cluster's to report.
func (r *Runner[T, S]) reportLastingError(obj T, err error) {
	after := r.ErrorEventAfter
	if after == 0 {
		after = DefaultErrorEventAfter
	}
	if after < 0 || r.Recorder == nil {
		return
	}
	key := obj.GetNamespace() + "/" + obj.GetName() + "/" + string(obj.GetUID())
	f := &r.failing
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.forget(key)
		return
	}
	if passing(err) {
		return
	}
	now := r.now()
	entry := f.failed(key, now)
	if entry == nil {
		return
	}
	msg := err.Error()
	if now.Sub(entry.since) < after || msg == entry.reported {
		return
	}
	entry.reported = msg
	r.Recorder.Event(obj, corev1.EventTypeWarning, ReasonReconcileError,
		truncate(fmt.Sprintf("Reconciling has failed for %s: %s", now.Sub(entry.since).Round(time.Second), msg), maxEventMessage))
}

// passing tells the errors that resolve at the next attempts, or that
// every object shares while the API server cannot serve, from those of
// one object.
func passing(err error) bool {
	return apierrors.IsConflict(err) || errors.Is(err, context.Canceled) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// truncate shortens s to at most limit bytes, on a character's boundary,
// ending it with "..." when it was cut.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func (r *Runner[T, S]) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}
