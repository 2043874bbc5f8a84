package crdarrival

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
// CustomResourceDefinitions, metadata only (it reads the one that changed in
// full, past the cache), and once every kind of the group is served it
// starts their watches on the operator's main controller,
// records the arrival and wakes the objects that waited for it. Those
// informers are not label-restricted (the manager's cache options are fixed
// at start), which costs memory, not correctness: only objects that map to
// one of the operator's own start a reconcile. The operator's RBAC needs
// get, list and watch on customresourcedefinitions.
//
// A CRD may also go away while the operator runs: an administrator
// uninstalls the other project, and the API server deletes every object of
// its kinds with it. An Arrival with Departed set sees that too (a CRD
// deleted, being deleted, or no longer serving the version the operator
// uses), records the departure and wakes the objects that wait for the
// kinds, so that they say what they wait for; when the CRDs come back it
// arrives again. The informers of the kinds stay: client-go's reflectors
// retry their lists with a backoff of their own, and find the kinds again
// when they return.

// Arrival starts the watches of kinds whose CRDs appear late, and with
// Departed follows their CRDs' departures and returns.
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
	// Waiting lists the main controller's objects that wait for the
	// kinds: nothing else would reconcile them. They are woken when the
	// kinds arrive and, with Departed, when they depart.
	Waiting func(ctx context.Context) ([]client.Object, error)
	// Departed, when set, records that the kinds are no longer all
	// served, after they arrived or were Present: one of their CRDs was
	// deleted, is being deleted or no longer serves the version wanted.
	// The arrival then happens again when they are all served again. Nil
	// means that departures are not watched: the kinds arrive once.
	Departed func(ctx context.Context)
	// Present says that the kinds were served when the operator started
	// and that the main controller's builder watches them already: the
	// arrival then only watches for their departure (Departed) and their
	// return.
	Present bool

	mgr  ctrl.Manager
	main controller.Controller
	// crds are the names of the kinds' CRDs, and versions the versions
	// wanted, in the order of Kinds.
	crds, versions []string
	// wake carries the objects to reconcile once the kinds are watched.
	wake chan ctrlevent.GenericEvent
	// mu guards what follows: the watches start exactly once, whatever
	// reconcile gets there, each arrival and departure is recorded once,
	// and a failed start or wake-up is tried again.
	mu      sync.Mutex
	started bool
	// present says that the kinds are recorded as served (Arrived, or
	// Present); woke that the objects waiting were woken since.
	present bool
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
	a.started, a.present, a.woke = a.Present, a.Present, a.Present
	b.WatchesRawSource(source.Channel(a.wake, &handler.EnqueueRequestForObject{}))
	return a
}

// Start registers the controller, named after main's, that watches the
// kinds' CRDs.
func (a *Arrival) Start(mgr ctrl.Manager, main controller.Controller, mainName string) error {
	a.mgr, a.main = mgr, main
	a.crds, a.versions = nil, nil
	for _, obj := range a.Kinds {
		gvk, err := mgr.GetClient().GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		a.crds = append(a.crds, fmt.Sprintf("%ss.%s", strings.ToLower(gvk.Kind), gvk.Group))
		a.versions = append(a.versions, gvk.Version)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(mainName+"-"+a.Name+"-crds").
		For(crdMetadata(), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return slices.Contains(a.crds, o.GetName()) }))).
		Complete(reconcile.Func(a.reconcile))
}

// reconcile starts the watches once every kind is served, then records
// the arrival and wakes the objects that waited, until that succeeded once;
// with Departed, it records a departure and wakes them too, and an arrival
// may follow again.
func (a *Arrival) reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	served, establishing, err := a.served(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !served {
		if a.Departed != nil && a.present {
			a.present, a.woke = false, false
			a.Departed(ctx)
		}
		if a.Departed != nil && !a.woke {
			if err := a.wakeWaiting(ctx); err != nil {
				return ctrl.Result{}, err
			}
		}
		if !establishing {
			// The CRD's creation is an event: nothing to poll for.
			a.polls = 0
			return ctrl.Result{}, nil
		}
		a.polls++
		return ctrl.Result{RequeueAfter: unservedPoll(a.polls - 1)}, nil
	}
	a.polls = 0
	if !a.started {
		for _, obj := range a.Kinds {
			if err := a.main.Watch(a.Watch(a.mgr, obj)); err != nil {
				return ctrl.Result{}, err
			}
		}
		a.started = true
	}
	if !a.present {
		a.present, a.woke = true, false
		a.Arrived(ctx)
	}
	if a.woke {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, a.wakeWaiting(ctx)
}

// wakeWaiting wakes the objects that wait for the kinds.
func (a *Arrival) wakeWaiting(ctx context.Context) error {
	waiting, err := a.Waiting(ctx)
	if err != nil {
		return err
	}
	for _, obj := range waiting {
		select {
		case a.wake <- ctrlevent.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.woke = true
	return nil
}

// served says whether every kind is served: its CRD, read from the API
// server, is established, not being deleted, and serves the version
// wanted, and the manager's REST mapper maps it. The mapper alone would
// not do once a kind arrived: it keeps what it mapped after the CRD is
// gone. establishing is true when no CRD is missing or being deleted, yet
// a kind is not served: it is being established, or serves other versions
// only, and is looked at again (unservedPoll).
func (a *Arrival) served(ctx context.Context) (served, establishing bool, err error) {
	gone := false
	for i, obj := range a.Kinds {
		crd, err := a.readCRD(ctx, a.crds[i])
		switch {
		case apierrors.IsNotFound(err):
			gone = true
		case err != nil:
			return false, false, err
		case !crd.DeletionTimestamp.IsZero():
			gone = true
		case !servesVersion(crd, a.versions[i]) || !Served(a.mgr, obj):
			establishing = true
		}
	}
	return !gone && !establishing, establishing && !gone, nil
}

// readCRD reads a CRD past the cache, which holds only their metadata,
// without needing the apiextensions types in the manager's scheme.
func (a *Arrival) readCRD(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := a.mgr.GetAPIReader().Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		return nil, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	return crd, nil
}

// servesVersion is true when crd is established and serves version.
func servesVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	return established && slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == version && v.Served
	})
}
