package panics

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/metrics"
	"github.com/ml-platform/ml-platform/shared/patch"
)

// EventInternalError is the reason of the Warning event a recovered panic
// emits on the object.
const EventInternalError = "InternalError"

var recovered = metrics.NewCounterVec("reconcile", "panics_total",
	"Panics recovered in a reconcile, by controller.", "controller")

// Object is what a guarded reconciler reconciles: an API object with
// conditions.
type Object interface {
	client.Object
	conditions.Object
}

// Guard reports recovered panics on the reconciled object.
type Guard struct {
	// Name is the controller's name, for logs and the metric.
	Name string
	// Prototype is an empty object of the reconciled kind; each report
	// reads a fresh copy into a deep copy of it. A kind with conditions
	// (an Object) is marked Stalled; any other kind (the ConfigMap of a
	// handed-off cleanup) gets the event only.
	Prototype client.Object
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
}

// Reconciler wraps r so that a panic in its Reconcile becomes an error (the
// controller retries it with its bounded exponential backoff) and, on the
// object, Stalled=True with reason InternalError and a Warning event. It is
// the one line every operator adds where it builds its controller:
//
//	Complete(tracing.Reconciler("widget", panics.Reconciler(mgr, "widget", &v1alpha1.Widget{}, r)))
func Reconciler(mgr ctrl.Manager, name string, prototype client.Object, r reconcile.Reconciler) reconcile.Reconciler {
	return Wrap(&Guard{
		Name: name, Prototype: prototype,
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorderFor(name + "-controller"),
	}, r)
}

// Wrap guards r with g.
func Wrap(g *Guard, r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
		defer func() {
			if v := recover(); v != nil {
				res, err = reconcile.Result{}, g.report(ctx, req, v, debug.Stack())
			}
		}()
		return r.Reconcile(ctx, req)
	})
}

// Describe says what a panic value is without repeating arbitrary values:
// a runtime error (nil dereference, index out of range) is the runtime's
// own text, which holds no data; anything else is named by its type only,
// because a value passed to panic may carry a password or a token.
func Describe(v any) string {
	var rerr runtime.Error
	if err, ok := v.(error); ok && errors.As(err, &rerr) {
		return rerr.Error()
	}
	return fmt.Sprintf("a panic with a value of type %T", v)
}

func (g *Guard) report(ctx context.Context, req reconcile.Request, v any, stack []byte) error {
	what := Describe(v)
	recovered.WithLabelValues(g.Name).Inc()
	logger := ctrl.LoggerFrom(ctx)
	logger.Error(nil, "Recovered a panic in Reconcile; retrying with backoff",
		"controller", g.Name, "panic", what, "stack", string(stack))
	err := fmt.Errorf("recovered panic reconciling %s: %s", req.NamespacedName, what)

	obj, ok := g.Prototype.DeepCopyObject().(client.Object)
	if !ok {
		return err
	}
	if getErr := patch.Get(ctx, g.Client, g.APIReader, req.NamespacedName, obj); getErr != nil {
		return errors.Join(err, client.IgnoreNotFound(getErr))
	}
	message := fmt.Sprintf("The operator hit an internal error reconciling this object (%s); it retries with backoff. "+
		"Report it to the platform team with the operator's logs", what)
	if withConditions, ok := obj.(Object); ok {
		if mErr := markStalled(ctx, g, withConditions, message); mErr != nil {
			logger.Error(mErr, "Writing the InternalError condition")
			return err
		}
	}
	g.Recorder.Event(obj, corev1.EventTypeWarning, EventInternalError, message)
	return err
}

// markStalled records the internal error on obj's conditions.
func markStalled(ctx context.Context, g *Guard, obj Object, message string) error {
	h, err := patch.NewHelper(obj, g.Client, g.APIReader)
	if err != nil {
		return err
	}
	conditions.MarkStalled(obj, commonv1alpha1.ReasonInternalError, message)
	_, err = h.Patch(ctx, obj)
	return err
}
