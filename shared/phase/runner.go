package phase

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Phase is one named step of a reconcile. Run changes obj's status in
// memory and converges children; it never writes obj itself.
type Phase[T Object] struct {
	Name string
	Run  func(ctx context.Context, obj T) (Result, error)
	// StopIfStalled ends the reconcile after this phase when obj's Stalled
	// condition is True: later phases need what this one found missing.
	StopIfStalled bool
}

// Runner runs a controller's phases and writes the result. Its fields are
// set once when the reconciler is built; Run may be called concurrently.
type Runner[T Object] struct {
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
	Phases  []Phase[T]
	// ObservedGeneration returns the status field that records the
	// generation the status was computed for; nil when the kind has none
	// (its conditions still carry observedGeneration).
	ObservedGeneration func(obj T) *int64
	// Events derives events from condition transitions; nil means
	// Transitions().
	Events EventRule
	// NoTransitionEvents turns transition events off, for controllers that
	// record their own.
	NoTransitionEvents bool
	// AfterWrite, when set, runs after a successful write (or when nothing
	// needed writing) and after the transition events, with the object as
	// the reconcile read it; statusWritten says whether status changed.
	// It is where a controller records metrics of what it persisted.
	AfterWrite func(before, after T, statusWritten bool)
}

// Run runs every phase in order on obj, then writes obj's metadata and
// status once, only where they changed, and then records the events of the
// condition transitions that write persisted. A failing phase does not stop
// the later ones (their effects are independent); the errors are joined and
// returned without a RequeueAfter, which controller-runtime would ignore.
func (r *Runner[T]) Run(ctx context.Context, obj T) (ctrl.Result, error) {
	return r.RunPhases(ctx, obj, r.Phases)
}

// RunPhases is Run with the phases given, for controllers whose phases
// share what one reconcile learned (closures over a per-reconcile scope).
func (r *Runner[T]) RunPhases(ctx context.Context, obj T, phases []Phase[T]) (ctrl.Result, error) {
	h, err := patch.NewHelper(obj, r.Client, r.APIReader)
	if err != nil {
		return ctrl.Result{}, err
	}
	before, ok := obj.DeepCopyObject().(T)
	if !ok {
		return ctrl.Result{}, fmt.Errorf("phase: %T copies to another type", obj)
	}
	res, phaseErr := r.runPhases(ctx, obj, phases)
	if r.ObservedGeneration != nil {
		*r.ObservedGeneration(obj) = obj.GetGeneration()
	}
	written, err := h.Patch(ctx, obj)
	if apierrors.IsNotFound(err) {
		// Deleted while we reconciled: nothing is left to write or report.
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, errors.Join(phaseErr, err)
	}
	if written.StatusPatched {
		r.recordEvents(obj, before.GetConditions())
	}
	if r.AfterWrite != nil {
		r.AfterWrite(before, obj, written.StatusPatched)
	}
	if phaseErr != nil {
		return ctrl.Result{}, phaseErr
	}
	return ctrl.Result{RequeueAfter: res.RequeueAfter}, nil
}

func (r *Runner[T]) runPhases(ctx context.Context, obj T, phases []Phase[T]) (Result, error) {
	var (
		res  ctrl.Result
		errs []error
	)
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	for _, p := range phases {
		start := clk.Now()
		pr, err := p.Run(ctx, obj)
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
	}
	return Result{RequeueAfter: res.RequeueAfter}, errors.Join(errs...)
}

func (r *Runner[T]) recordEvents(obj T, before []metav1.Condition) {
	if r.NoTransitionEvents || r.Recorder == nil {
		return
	}
	rule := r.Events
	if rule == nil {
		rule = Transitions()
	}
	for _, e := range rule(before, obj.GetConditions()) {
		r.Recorder.Event(obj, e.Type, e.Reason, e.Message)
	}
}
