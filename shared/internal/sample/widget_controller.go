package sample

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/patch"
	"github.com/ml-platform/ml-platform/shared/tracing"
)

// FinalizerName guards the Widget's external record.
const FinalizerName = "testing.mlplatform.dev/cleanup"

// Reconciler reconciles Widgets following the repository's reconcile
// skeleton: get, deletion path, ensure finalizer, phases, one status write,
// then events.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	External  *External
	Finalizer *finalizer.Finalizer
}

// NewReconciler wires a Reconciler to a manager.
func NewReconciler(mgr ctrl.Manager, ext *External) *Reconciler {
	r := &Reconciler{
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
	return r
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&samplev1alpha1.Widget{}).
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

	h, err := patch.NewHelper(w, r.Client, r.APIReader)
	if err != nil {
		return ctrl.Result{}, err
	}
	wasReady := conditions.IsTrue(w, commonv1alpha1.ConditionReady)

	phaseErr := r.provision(w)
	w.Status.ObservedGeneration = w.Generation
	if phaseErr != nil {
		conditions.MarkReconciling(w, "ExternalUnavailable", phaseErr.Error())
	} else {
		w.Status.Echo = w.Spec.Message
		conditions.MarkReady(w, commonv1alpha1.ReasonReconciled, "The external record holds the message")
	}
	res, err := h.Patch(ctx, w)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if res.StatusPatched && !wasReady && conditions.IsTrue(w, commonv1alpha1.ConditionReady) {
		r.Recorder.Event(w, corev1.EventTypeNormal, "Ready", "The external record holds the message")
	}
	return ctrl.Result{}, phaseErr
}

// provision converges the external record: read, compare, write only when
// it differs.
func (r *Reconciler) provision(w *samplev1alpha1.Widget) error {
	key := string(w.UID)
	if got, ok := r.External.Get(key); ok && got == w.Spec.Message {
		return nil
	}
	return r.External.Put(key, w.Spec.Message)
}

func (r *Reconciler) cleanup(_ context.Context, obj finalizer.Object) error {
	return r.External.Delete(string(obj.GetUID()))
}
