package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// Some kinds the operator watches belong to other projects whose CRDs may
// be installed after the operator started: the Kubeflow training-operator
// (the chart's kubeflow.enabled turned on in a running platform) and Kueue
// (installed for a team after ours). The operator then watches their
// CustomResourceDefinitions, metadata only, and once every kind of such a
// group is served it starts their watches on the main controller, records
// the arrival and wakes the jobs that waited for it: no restart is needed.
// Those informers are not label-restricted (the manager's cache options
// are fixed at start), which costs memory, not correctness: only objects
// that map to a TrainingJob start a reconcile.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// crdArrival starts the watches of kinds whose CRDs appear late.
type crdArrival struct {
	r *Reconciler
	// name tells the arrival's controller apart from the others.
	name string
	// kinds must all be served before anything starts.
	kinds []client.Object
	// watch is the source that watches one of kinds for the main
	// controller, as its builder would have.
	watch func(mgr ctrl.Manager, obj client.Object) source.Source
	// arrived records that the kinds are watched now.
	arrived func(ctx context.Context)
	// wakes selects the TrainingJobs that waited for the kinds: nothing
	// else would reconcile them.
	wakes func(tj *trainingv1alpha1.TrainingJob) bool

	mgr  ctrl.Manager
	main controller.Controller
	// wake carries the TrainingJobs to reconcile once the kinds are watched.
	wake chan ctrlevent.GenericEvent
	// mu guards started and woke: the watches start exactly once,
	// whatever reconcile gets there, and a failed start or wake-up is
	// tried again.
	mu      sync.Mutex
	started bool
	woke    bool
}

// pollWhileUnserved is how soon a CRD that exists but whose kind is not
// served yet (it is being established) is looked at again.
const pollWhileUnserved = 2 * time.Second

// crdMetadata is the metadata-only form of a CustomResourceDefinition.
func crdMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return m
}

// register adds the wake-up source to the main controller's builder b;
// start then starts the CRD watch once the main controller is built.
func (a *crdArrival) register(b *builder.Builder) *crdArrival {
	a.wake = make(chan ctrlevent.GenericEvent, 64)
	b.WatchesRawSource(source.Channel(a.wake, &handler.EnqueueRequestForObject{}))
	return a
}

// start registers the controller that watches the kinds' CRDs.
func (a *crdArrival) start(mgr ctrl.Manager, main controller.Controller) error {
	a.mgr, a.main = mgr, main
	names := map[string]bool{}
	for _, obj := range a.kinds {
		gvk, err := a.r.Client.GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		names[fmt.Sprintf("%ss.%s", strings.ToLower(gvk.Kind), gvk.Group)] = true
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name+"-"+a.name+"-crds").
		For(crdMetadata(), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return names[o.GetName()] }))).
		Complete(reconcile.Func(a.reconcile))
}

// reconcile starts the watches once every kind is served, then records
// the arrival and wakes the jobs that waited, until that succeeded once.
func (a *crdArrival) reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	for _, obj := range a.kinds {
		if !installed(a.mgr, obj) {
			return ctrl.Result{RequeueAfter: pollWhileUnserved}, nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.woke {
		return ctrl.Result{}, nil
	}
	if !a.started {
		for _, obj := range a.kinds {
			if err := a.main.Watch(a.watch(a.mgr, obj)); err != nil {
				return ctrl.Result{}, err
			}
		}
		a.started = true
		a.arrived(ctx)
	}
	if err := a.wakeJobs(ctx); err != nil {
		return ctrl.Result{}, err
	}
	a.woke = true
	return ctrl.Result{}, nil
}

// wakeJobs reconciles every unfinished TrainingJob that waited for the
// kinds.
func (a *crdArrival) wakeJobs(ctx context.Context) error {
	list := &trainingv1alpha1.TrainingJobList{}
	if err := a.r.Client.List(ctx, list); err != nil {
		return err
	}
	for i := range list.Items {
		tj := &list.Items[i]
		if finished(tj) || !a.wakes(tj) {
			continue
		}
		select {
		case a.wake <- ctrlevent.GenericEvent{Object: tj}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
