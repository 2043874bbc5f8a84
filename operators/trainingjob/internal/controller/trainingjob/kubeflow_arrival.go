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
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
)

// The Kubeflow CRDs may be installed after the operator started (the chart's
// kubeflow.enabled turned on in a running platform). The operator then
// watches their CustomResourceDefinitions, metadata only, and once every
// Kubeflow kind is served it starts the watches of those kinds, makes the
// backend available and wakes the jobs that waited for it: no restart is
// needed. The kinds' informers are then not label-restricted (the manager's
// cache options are fixed at start), which costs memory for Kubeflow jobs
// of others until the operator next restarts, not correctness: only jobs a
// TrainingJob controls map to a reconcile.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// kubeflowArrival starts the Kubeflow backend when its CRDs appear.
type kubeflowArrival struct {
	r       *Reconciler
	mgr     ctrl.Manager
	main    controller.Controller
	backend *kubeflowjob.Backend
	// wake carries the TrainingJobs to reconcile once the backend runs.
	wake chan ctrlevent.GenericEvent
	// mu guards started: the watches start exactly once, whatever
	// reconcile gets there, and a failed start is tried again.
	mu      sync.Mutex
	started bool
}

// kubeflowPollWhileUnserved is how soon a CRD that exists but whose kind is
// not served yet (it is being established) is looked at again.
const kubeflowPollWhileUnserved = 2 * time.Second

// crdMetadata is the metadata-only form of a CustomResourceDefinition.
func crdMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return m
}

// watchKubeflowArrival, for an operator that started without the Kubeflow
// CRDs, registers the wake-up source on the main controller's builder b;
// startKubeflowArrival then starts the CRD watch once the main controller
// is built.
func (r *Reconciler) watchKubeflowArrival(b *builder.Builder) *kubeflowArrival {
	be, ok := r.Backends.Get(trainingv1alpha1.BackendKubeflow)
	kf, isKF := be.(*kubeflowjob.Backend)
	if !ok || !isKF || kf.Available() == nil {
		return nil
	}
	a := &kubeflowArrival{r: r, backend: kf, wake: make(chan ctrlevent.GenericEvent, 64)}
	b.WatchesRawSource(source.Channel(a.wake, &handler.EnqueueRequestForObject{}))
	return a
}

// start registers the controller that watches the Kubeflow CRDs.
func (a *kubeflowArrival) start(mgr ctrl.Manager, main controller.Controller) error {
	a.mgr, a.main = mgr, main
	names := map[string]bool{}
	for _, obj := range a.backend.Owned() {
		gvk, err := a.r.Client.GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		names[fmt.Sprintf("%ss.%s", strings.ToLower(gvk.Kind), gvk.Group)] = true
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name+"-kubeflow-crds").
		For(crdMetadata(), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return names[o.GetName()] }))).
		Complete(reconcile.Func(a.reconcile))
}

// reconcile starts the backend once every Kubeflow kind is served.
func (a *kubeflowArrival) reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	if a.backend.Available() == nil {
		return ctrl.Result{}, nil
	}
	for _, obj := range a.backend.Owned() {
		if !installed(a.mgr, obj) {
			return ctrl.Result{RequeueAfter: kubeflowPollWhileUnserved}, nil
		}
	}
	if err := a.startWatchesOnce(); err != nil {
		return ctrl.Result{}, err
	}
	a.backend.MarkInstalled()
	ctrl.LoggerFrom(ctx).Info("The Kubeflow CRDs appeared: the kubeflow backend runs now")
	return ctrl.Result{}, a.wakeKubeflowJobs(ctx)
}

// startWatchesOnce starts the watches unless an earlier reconcile did.
func (a *kubeflowArrival) startWatchesOnce() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return nil
	}
	if err := a.startWatches(); err != nil {
		return err
	}
	a.started = true
	return nil
}

// startWatches watches the Kubeflow kinds as the builder's Owns would.
func (a *kubeflowArrival) startWatches() error {
	for _, obj := range a.backend.Owned() {
		h := handler.EnqueueRequestForOwner(a.mgr.GetScheme(), a.mgr.GetRESTMapper(), &trainingv1alpha1.TrainingJob{}, handler.OnlyControllerOwner())
		if err := a.main.Watch(source.Kind(a.mgr.GetCache(), obj, h, a.r.childMatters())); err != nil {
			return err
		}
	}
	return nil
}

// wakeKubeflowJobs reconciles every unfinished TrainingJob on the kubeflow
// backend: they were Stalled, and nothing else would wake them.
func (a *kubeflowArrival) wakeKubeflowJobs(ctx context.Context) error {
	list := &trainingv1alpha1.TrainingJobList{}
	if err := a.r.Client.List(ctx, list); err != nil {
		return err
	}
	for i := range list.Items {
		tj := &list.Items[i]
		if a.r.Backends.Of(tj) != trainingv1alpha1.BackendKubeflow || finished(tj) {
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
