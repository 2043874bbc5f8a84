package notebook

import (
	"context"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/crdarrival"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/metrics"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/patch"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/podrefusal"
	"github.com/ml-platform/ml-platform/shared/tracing"
)

// Prober reads a Jupyter server's activity. *jupyter.Prober implements it;
// tests substitute scripted activity. The Reconciler never calls it
// itself: its jupyter.Monitor does, in the background.
type Prober = jupyter.Observer

// +kubebuilder:rbac:groups=notebooks.mlplatform.dev,resources=notebooks,verbs=get;list;watch
// +kubebuilder:rbac:groups=notebooks.mlplatform.dev,resources=notebooks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services;persistentvolumeclaims,verbs=get;list;watch;create;patch
// Secrets: the operator needs only the token Secrets it creates itself,
// all labelled managed-by notebook-operator. It creates them (create),
// caches them through a label-restricted informer (list, watch), and reads
// one past the cache when the cache has not caught up with a Secret created
// a moment ago or to tell a foreign Secret of the same name (get). It never
// updates, patches or deletes a Secret (the token never changes; the
// garbage collector deletes it with the Notebook), and it never reads a
// FeatureStore's client configuration: the kubelet mounts that by name.
// RBAC cannot express "only Secrets with this label" (resourceNames cannot
// list names that Notebooks created later will derive), so the informer's
// label selector, not RBAC, is what keeps other Secrets out of the
// operator's memory, and the chart's admission policy is what keeps its
// writes to its own objects. Where that is not enough, the chart's
// rbac.namespaces binds these rules in listed namespaces only and the
// operator watches only those; the default stays cluster-wide because one
// operator serves Notebooks in every namespace, including namespaces
// created after it was installed, and granting itself a Role in each new
// namespace would need the escalate and bind verbs, which are more
// powerful than what they would replace.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// The StatefulSet controller reports a pod it could not create (a quota
// rejection, an admission webhook's refusal) only as FailedCreate events on
// the StatefulSet; the operator watches those events, field-selected.
// +kubebuilder:rbac:groups="",resources=events,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies;ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestores,verbs=get;list;watch

// Reconciler reconciles Notebooks. It needs no finalizer: every child but a
// retained workspace is owned and collected by the garbage collector, and a
// retained workspace is never owned, so deletion can never get stuck on the
// operator.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	Config    config.Config
	Catalog   accelerator.Catalog
	// Prober probes the Jupyter servers, from the Monitor that
	// SetupWithManager builds around it, never from a reconcile.
	Prober Prober
	Clock  clock.PassiveClock
	// Endpoint is the base URL the prober uses for a Notebook; the
	// in-cluster URL when nil.
	Endpoint func(nb *notebooksv1alpha1.Notebook) string
	// NewToken generates access tokens; crypto/rand when nil.
	NewToken func() (string, error)
	// Events reads the StatefulSets' FailedCreate events; SetupWithManager
	// sets it, and nil reads none.
	Events *podrefusal.Watch
	// Namespaces limits the event cache, which the operator builds beside
	// the manager's, to a namespace-scoped install's namespaces
	// (manager.Config.CacheNamespaces); nil means every namespace.
	Namespaces map[string]cache.Config

	// WatchesWorkloads is false when Kueue's Workload CRD was not
	// installed at start; queued Notebooks then show no wait of Kueue's
	// until it appears (kueueArrival), when workloadsArrived turns true.
	WatchesWorkloads bool
	workloadsArrived atomic.Bool

	// QueuePositionRefresh is how often a queued Notebook's position in
	// its LocalQueue is read again from Kueue's visibility API; zero reads
	// none.
	QueuePositionRefresh time.Duration
	// Visibility reads Kueue's visibility API.
	Visibility dynamic.Interface
	// positions caches the LocalQueues' pending workloads.
	positions *kueue.Positions

	// PhaseMetrics times the reconcile's phases.
	PhaseMetrics *phase.Metrics

	// probes runs Prober in the background (SetupWithManager builds it):
	// the tenant's Jupyter server answers when it likes, and a reconcile
	// must not wait for it.
	probes *jupyter.Monitor

	metrics *notebookMetrics
	runner  *phase.Runner[*notebooksv1alpha1.Notebook, *scope]
}

// probedBuffer is how many answered probes may wait for the controller to
// take them in. A probe that finds it full waits for room rather than lose
// the answer; its slot is free by then.
const probedBuffer = 1024

// NewReconciler wires a Reconciler to a manager.
func NewReconciler(mgr ctrl.Manager, cfg config.Config, catalog accelerator.Catalog) (*Reconciler, error) {
	phaseMetrics, err := phase.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return nil, err
	}
	visibility, err := dynamic.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorderFor("notebook-controller"),
		Config:    cfg,
		Catalog:   catalog,
		Prober:    jupyter.NewProber(cfg.Probe.Timeout.Duration, cfg.Probe.Concurrency, nil),
		Clock:     clock.RealClock{},
		metrics:   newNotebookMetrics(),

		PhaseMetrics: phaseMetrics,

		QueuePositionRefresh: kueue.DefaultPositionRefresh,
		Visibility:           visibility,
	}
	return r, nil
}

// OwnedObjects are the kinds the operator creates; the manager caches only
// those labelled as managed by the operator.
func OwnedObjects() []client.Object {
	return []client.Object{
		&appsv1.StatefulSet{}, &corev1.Service{}, &corev1.Secret{}, &corev1.PersistentVolumeClaim{},
		&corev1.Pod{}, &networkingv1.NetworkPolicy{}, &networkingv1.Ingress{},
	}
}

// SetupWithManager registers the controller. The FeatureStore watch is
// added only when the API server serves FeatureStores, so the operator
// works in clusters without the FeatureStore operator.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	// The Runner is built here, once, from the fields as the caller left
	// them after NewReconciler (tests swap the client or the clock).
	r.runner = r.newRunner()
	if r.QueuePositionRefresh > 0 {
		// The cache's lifetime bounds the load on Kueue's API, in real
		// time: r.Clock is the culling's, which tests move by hand.
		r.positions = kueue.NewPositions(kueue.VisibilityFetch(r.Visibility), r.QueuePositionRefresh/2, clock.RealClock{})
	}
	var answers source.Source
	r.probes, answers = r.newMonitor()
	if err := mgr.Add(r.probes); err != nil {
		return err
	}
	// The context only reaches the informers the indexes are added to,
	// which the manager starts and stops.
	ctx := context.Background()
	if err := metrics.Replace(NewPhaseCollector(mgr.GetCache())); err != nil {
		return err
	}
	if err := featureref.Index(ctx, mgr.GetFieldIndexer(), &notebooksv1alpha1.Notebook{}, func(nb *notebooksv1alpha1.Notebook) []commonv1alpha1.FeatureStoreReference {
		return nb.Spec.FeatureStores
	}); err != nil {
		return err
	}
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[render.LabelName]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	events, err := podrefusal.New(ctx, mgr, r.Namespaces, podrefusal.KubernetesController("StatefulSet"))
	if err != nil {
		return err
	}
	r.Events = events
	b := ctrl.NewControllerManagedBy(mgr).
		// Annotations carry the user's restart and force-update requests;
		// they do not bump the generation, so generation alone would miss
		// them. Status-only updates (our own writes) pass neither.
		For(&notebooksv1alpha1.Notebook{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&notebooksv1alpha1.Notebook{}, phase.UnreconciledFirst()).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&networkingv1.Ingress{}).
		// A retained workspace has no owner, and pods belong to the
		// StatefulSet: both map back by label.
		Watches(&corev1.PersistentVolumeClaim{}, byLabel).
		Watches(&corev1.Pod{}, byLabel).
		WithOptions(opts).
		Named("notebook")
	var arrival *crdarrival.Arrival
	if _, err := mgr.GetRESTMapper().RESTMapping(kueue.WorkloadGVK.GroupKind(), kueue.WorkloadGVK.Version); err == nil {
		r.WatchesWorkloads = true
		b = b.Watches(kueue.NewWorkload(), handler.EnqueueRequestsFromMapFunc(workloadToNotebook))
	} else {
		mgr.GetLogger().Info("Kueue's Workload API not served; queued Notebooks show no reason of Kueue's until it is", "reason", err.Error())
		// CRDs are cluster-scoped: a namespace-scoped install may not
		// watch them, and needs a restart once Kueue is installed.
		if r.Namespaces == nil {
			arrival = r.kueueArrival().Register(b)
		}
	}
	// A probe's answer brings its Notebook back, so decisions that wait
	// for it are taken as soon as it is in.
	b = b.WatchesRawSource(answers)
	for _, src := range events.Sources(r.failedCreateOwner) {
		b = b.WatchesRawSource(src)
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(featureref.GVK.GroupKind(), featureref.GVK.Version); err == nil {
		store := &unstructured.Unstructured{}
		store.SetGroupVersionKind(featureref.GVK)
		b = b.Watches(store, handler.EnqueueRequestsFromMapFunc(featureref.Referrers(r.Client, func() *notebooksv1alpha1.NotebookList {
			return &notebooksv1alpha1.NotebookList{}
		})))
	} else {
		mgr.GetLogger().Info("FeatureStore API not served; FeatureStore changes are picked up at the next reconcile", "reason", err.Error())
	}
	c, err := b.Build(tracing.Reconciler("notebook", panics.Reconciler(mgr, "notebook", &notebooksv1alpha1.Notebook{}, r)))
	if err != nil || arrival == nil {
		return err
	}
	return arrival.Start(mgr, c, "notebook")
}

// newMonitor builds the Monitor that probes the Jupyter servers in the
// background, and the source through which each answer brings its
// Notebook back to the controller.
func (r *Reconciler) newMonitor() (*jupyter.Monitor, source.Source) {
	answered := make(chan event.TypedGenericEvent[*notebooksv1alpha1.Notebook], probedBuffer)
	limits := jupyter.Limits{Total: r.Config.Probe.Concurrency, PerNamespace: r.Config.Probe.NamespaceConcurrency}
	m := jupyter.NewMonitor(r.Prober, r.Clock, limits, func(ctx context.Context, nb types.NamespacedName) {
		e := event.TypedGenericEvent[*notebooksv1alpha1.Notebook]{
			Object: &notebooksv1alpha1.Notebook{ObjectMeta: metav1.ObjectMeta{Namespace: nb.Namespace, Name: nb.Name}},
		}
		select {
		case answered <- e:
		case <-ctx.Done():
		}
	})
	return m, source.Channel(answered, &handler.TypedEnqueueRequestForObject[*notebooksv1alpha1.Notebook]{})
}

// failedCreateOwner maps a FailedCreate event to the Notebook of its
// StatefulSet; the label-restricted cache knows only the operator's.
func (r *Reconciler) failedCreateOwner(ctx context.Context, e *corev1.Event) []reconcile.Request {
	sts := &appsv1.StatefulSet{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}, sts); err != nil {
		return nil
	}
	name := sts.Labels[render.LabelName]
	if name == "" || sts.UID != e.InvolvedObject.UID {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: sts.Namespace, Name: name}}}
}

// Reconcile converges one Notebook: phases that ensure each child, one
// status write, then events.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nb := &notebooksv1alpha1.Notebook{}
	if err := patch.Get(ctx, r.Client, r.APIReader, req.NamespacedName, nb); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.metrics.forget(req.NamespacedName, r.Clock.Now())
			r.probes.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !nb.DeletionTimestamp.IsZero() {
		// The garbage collector removes the owned children; a retained
		// workspace was never owned. Nothing holds the Notebook.
		r.metrics.forget(req.NamespacedName, r.Clock.Now())
		r.probes.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	s := &scope{nb: nb, before: nb.DeepCopy(), now: r.Clock.Now()}
	return r.runner.Run(ctx, nb, s)
}

// newRunner builds the Runner of every reconcile: the steps, which share
// one reconcile's scope, in order, ending with the status they add up to,
// then one status write, the events and the metrics. The Notebook's steps
// build on each other: after one failed or stalled the Notebook, the later
// ones are skipped and only the status is computed. resizeWorkspace comes
// last, after the phases that start and stop the server, because the
// cluster may be unable to grow the workspace for as long as the Notebook
// lives. Its events (culls,
// warnings, restarts, refused pods) say more than condition transitions.
func (r *Reconciler) newRunner() *phase.Runner[*notebooksv1alpha1.Notebook, *scope] {
	return &phase.Runner[*notebooksv1alpha1.Notebook, *scope]{
		Controller: "notebook",
		Client:     r.Client,
		APIReader:  r.APIReader,
		Recorder:   r.Recorder,
		Clock:      r.Clock,
		Metrics:    r.PhaseMetrics,
		Phases: []phase.Phase[*scope]{
			phase.Step("resolveInputs", r.resolveInputs),
			phase.Step("ensureTokenSecret", r.ensureTokenSecret),
			phase.Step("ensureWorkspace", r.ensureWorkspace),
			phase.Step("ensureService", r.ensureService),
			phase.Step("ensureNetworkPolicy", r.ensureNetworkPolicy),
			phase.Step("ensureIngress", r.ensureIngress),
			phase.Step("observeServer", r.observeServer),
			phase.Step("observeQueue", r.observeQueue),
			phase.Step("decideLifecycle", r.decideLifecycle),
			phase.Step("ensureStatefulSet", r.ensureStatefulSet),
			phase.Step("resizeWorkspace", r.resizeWorkspace),
			{Name: "status", Always: true, Run: func(_ context.Context, s *scope) (phase.Result, error) {
				computeStatus(s)
				return phase.Result{}, nil
			}},
		},
		ObservedGeneration: func(s *scope) *int64 { return &s.nb.Status.ObservedGeneration },
		Halt:               func(s *scope, err error) bool { return err != nil || s.stalled != "" },
		Events: func(s *scope, _, _ *notebooksv1alpha1.Notebook) []phase.Event {
			return events(s)
		},
		AfterWrite: func(s *scope, _, _ *notebooksv1alpha1.Notebook, _ bool) {
			r.metrics.observe(s)
		},
	}
}
