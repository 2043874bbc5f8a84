package sample

import (
	"context"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/patch"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/tracing"
)

// FinalizerName guards the Widget's external record.
const FinalizerName = "testing.mlplatform.dev/cleanup"

// Reasons of the Widget's conditions.
const (
	// ReasonExternalUnavailable: the external system refused the record.
	ReasonExternalUnavailable = "ExternalUnavailable"
)

// Reconciler reconciles Widgets following the repository's reconcile
// skeleton (docs/developing.md), as every operator does: read, deletion
// path, ensure finalizer, then the phase.Runner built in NewReconciler runs
// the steps over one reconcile's scope, writes status once and records the
// events of the condition transitions.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	External  *External
	Finalizer *finalizer.Finalizer
	// ErrorEventAfter is the Runner's: how long reconciles may keep failing
	// before the error is a Warning event; zero is phase's default.
	ErrorEventAfter time.Duration
	runner          *phase.Runner[*samplev1alpha1.Widget, *scope]
	metrics         *phase.Metrics
}

// scope is what one reconcile's steps share: the Widget and what they
// found.
type scope struct {
	w *samplev1alpha1.Widget
	// held is the message the external system holds.
	held string
}

// NewReconciler wires a Reconciler to a manager. The phase metrics are
// registered on controller-runtime's registry, which the manager serves.
func NewReconciler(mgr ctrl.Manager, ext *External) (*Reconciler, error) {
	m, err := phase.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		metrics:   m,
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorderFor("widget-controller"),
		External:  ext,
	}
	r.Finalizer = &finalizer.Finalizer{
		Name:      FinalizerName,
		Cleanup:   r.cleanup,
		Client:    r.Client,
		APIReader: r.APIReader,
		Recorder:  r.Recorder,
	}
	return r, nil
}

// newRunner builds the Runner of every reconcile: the steps, which share
// one reconcile's scope, and the status they add up to.
func (r *Reconciler) newRunner() *phase.Runner[*samplev1alpha1.Widget, *scope] {
	return &phase.Runner[*samplev1alpha1.Widget, *scope]{
		Controller: "widget",
		Client:     r.Client,
		APIReader:  r.APIReader,
		Recorder:   r.Recorder,
		Clock:      clock.RealClock{},
		Metrics:    r.metrics,
		// An error the status does not explain reaches the user as a
		// Warning event once it has lasted.
		ErrorEventAfter: r.ErrorEventAfter,
		Phases: []phase.Phase[*scope]{
			phase.Step("provision", r.provision),
			phase.Step("echo", r.echo),
			{Name: "status", Always: true, Run: status},
		},
		ObservedGeneration: func(s *scope) *int64 { return &s.w.Status.ObservedGeneration },
	}
}

// SetupWithManager builds the Runner, once, from the fields as the caller
// left them after NewReconciler, and registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.runner = r.newRunner()
	return ctrl.NewControllerManagedBy(mgr).
		For(&samplev1alpha1.Widget{}).
		// On the priority queue (--priority-queue), a Widget no reconcile
		// saw at its generation goes before the converged ones of the
		// first list.
		Watches(&samplev1alpha1.Widget{}, phase.UnreconciledFirst()).
		WithOptions(opts).
		Named("widget").
		Complete(tracing.Reconciler("widget", panics.Reconciler(mgr, "widget", &samplev1alpha1.Widget{}, r)))
}

// Reconcile converges one Widget.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &samplev1alpha1.Widget{}
	if err := patch.Get(ctx, r.Client, r.APIReader, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !w.DeletionTimestamp.IsZero() {
		return r.Finalizer.Finalize(ctx, w)
	}
	if added, err := r.Finalizer.Ensure(ctx, w); added || err != nil {
		return ctrl.Result{}, err
	}
	return r.runner.Run(ctx, w, &scope{w: w})
}

// provision converges the external record: read, compare, write only when
// it differs.
func (r *Reconciler) provision(_ context.Context, s *scope) (ctrl.Result, error) {
	key := string(s.w.UID)
	if got, ok := r.External.Get(key); ok && got == s.w.Spec.Message {
		return ctrl.Result{}, nil
	}
	if err := r.External.Put(key, s.w.Spec.Message); err != nil {
		conditions.MarkReconciling(s.w, ReasonExternalUnavailable, err.Error())
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// echo observes the message the external system holds, whether or not
// provision managed to change it in this reconcile.
func (r *Reconciler) echo(_ context.Context, s *scope) (ctrl.Result, error) {
	s.held, _ = r.External.Get(string(s.w.UID))
	return ctrl.Result{}, nil
}

// status adds up what the steps found: the echo, and Ready once the
// external system holds the message; until then the condition provision
// set stays.
func status(_ context.Context, s *scope) (phase.Result, error) {
	s.w.Status.Echo = s.held
	if s.held == s.w.Spec.Message {
		conditions.MarkReady(s.w, commonv1alpha1.ReasonReconciled, "The external record holds the message")
	}
	return phase.Result{}, nil
}

func (r *Reconciler) cleanup(_ context.Context, obj finalizer.Object) error {
	return r.External.Delete(string(obj.GetUID()))
}
