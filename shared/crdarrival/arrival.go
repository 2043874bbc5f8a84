package crdarrival

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Some kinds an operator watches belong to other projects whose CRDs may be
// installed after the operator started: the Kubeflow training-operator (a
// chart's kubeflow.enabled turned on in a running platform) or Kueue
// (installed for a team after ours). An Arrival then watches their
// CustomResourceDefinitions, metadata only, and once every kind of the group
// is served it starts their watches on the operator's main controller,
// records the arrival and wakes the objects that waited for it. Those
// informers are not label-restricted (the manager's cache options are fixed
// at start), which costs memory, not correctness: only objects that map to
// one of the operator's own start a reconcile. The operator's RBAC needs
// get, list and watch on customresourcedefinitions.

// Arrival starts the watches of kinds whose CRDs appear late.
type Arrival struct {
	// Name tells the arrival's controller apart from the others.
	Name string
	// Kinds must all be served before anything starts.
	Kinds []client.Object
	// Watch is the source that watches one of Kinds for the main
	// controller, as its builder would have.
	Watch func(mgr ctrl.Manager, obj client.Object) source.Source
	// Arrived records that the kinds are watched now.
	Arrived func(ctx context.Context)
	// Waiting lists the main controller's objects that waited for the
	// kinds: nothing else would reconcile them.
	Waiting func(ctx context.Context) ([]client.Object, error)

	mgr  ctrl.Manager
	main controller.Controller
	// wake carries the objects to reconcile once the kinds are watched.
	wake chan ctrlevent.GenericEvent
	// mu guards started and woke: the watches start exactly once,
	// whatever reconcile gets there, and a failed start or wake-up is
	// tried again.
	mu      sync.Mutex
	started bool
	woke    bool
	// polls counts the looks in a row that found a kind not served.
	polls int
}

// A CRD that exists while its kind is not served is being established,
// which takes moments, or serves another version of the kind, which may
// never change (the MPI Operator's v2beta1 MPIJob where the
// training-operator's v1 is wanted). It is looked at again soon at first,
// then less and less often: firstUnservedPoll doubling up to
// maxUnservedPoll, each wait jittered so that operators do not poll in
// step. Nothing but time marks the CRD's change to another version, which
// an update of the CRD itself also wakes.
const (
	firstUnservedPoll = 2 * time.Second
	maxUnservedPoll   = 5 * time.Minute
	unservedJitter    = 0.2
)

// unservedPoll is the wait before the next look at a CRD whose kind was
// not served polls times in a row.
func unservedPoll(polls int) time.Duration {
	d := maxUnservedPoll
	if polls < 8 && firstUnservedPoll<<polls < maxUnservedPoll {
		d = firstUnservedPoll << polls
	}
	return wait.Jitter(d, unservedJitter)
}

// Served is true when the API server serves obj's kind, as far as the
// manager's REST mapper knows.
func Served(mgr ctrl.Manager, obj client.Object) bool {
	gvk, err := mgr.GetClient().GroupVersionKindFor(obj)
	if err != nil {
		return false
	}
	_, err = mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

func crdMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return m
}

// Register adds the wake-up source to the main controller's builder b;
// Start then starts the CRD watch once the main controller is built.
func (a *Arrival) Register(b *builder.Builder) *Arrival {
	a.wake = make(chan ctrlevent.GenericEvent, 64)
	b.WatchesRawSource(source.Channel(a.wake, &handler.EnqueueRequestForObject{}))
	return a
}

// Start registers the controller, named after main's, that watches the
// kinds' CRDs.
func (a *Arrival) Start(mgr ctrl.Manager, main controller.Controller, mainName string) error {
	a.mgr, a.main = mgr, main
	names := map[string]bool{}
	for _, obj := range a.Kinds {
		gvk, err := mgr.GetClient().GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		names[fmt.Sprintf("%ss.%s", strings.ToLower(gvk.Kind), gvk.Group)] = true
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(mainName+"-"+a.Name+"-crds").
		For(crdMetadata(), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return names[o.GetName()] }))).
		Complete(reconcile.Func(a.reconcile))
}

// reconcile starts the watches once every kind is served, then records
// the arrival and wakes the objects that waited, until that succeeded once.
func (a *Arrival) reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	for _, obj := range a.Kinds {
		if !Served(a.mgr, obj) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.polls++
			return ctrl.Result{RequeueAfter: unservedPoll(a.polls - 1)}, nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.polls = 0
	if a.woke {
		return ctrl.Result{}, nil
	}
	if !a.started {
		for _, obj := range a.Kinds {
			if err := a.main.Watch(a.Watch(a.mgr, obj)); err != nil {
				return ctrl.Result{}, err
			}
		}
		a.started = true
		a.Arrived(ctx)
	}
	waiting, err := a.Waiting(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, obj := range waiting {
		select {
		case a.wake <- ctrlevent.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return ctrl.Result{}, ctx.Err()
		}
	}
	a.woke = true
	return ctrl.Result{}, nil
}
