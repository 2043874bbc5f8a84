package trainingjob

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
	"github.com/ml-platform/ml-platform/shared/crdarrival"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/metrics"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/patch"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/podrefusal"
	"github.com/ml-platform/ml-platform/shared/requeue"
	"github.com/ml-platform/ml-platform/shared/tracing"
)

// Name is the controller's name, in logs, metrics and traces.
const Name = "trainingjob"

// OperatorName is the operator's name: its binary, leader election lease,
// field manager and the value of app.kubernetes.io/managed-by on everything
// it creates.
const OperatorName = "trainingjob-operator"

// AddToScheme registers every kind the operator reads or writes.
var AddToScheme = []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainingv1alpha1.AddToScheme, kubeflowv1.AddToScheme}

// The operator's permissions; `make generate` turns them into the chart's
// ClusterRole. The finalizers subresource is only for blockOwnerDeletion on
// the jobs, which clusters with OwnerReferencesPermissionEnforcement check.
// Pods are only listed, watched and deleted (the clean-pod
// policy, the left-overs of a failed run): the Job controller or the
// Kubeflow training-operator creates them. Jobs and Kubeflow jobs are
// deleted only to end the run of a queued job the user suspends. The
// namespace's headless Service for the native ranks and the EndpointSlices
// that publish them are the operator's to write and delete (package
// rankdns).
// Checkpoint claims are created, and patched only to adopt a retained
// claim under deletionPolicy Delete; they are never deleted by the
// operator (the garbage collector does, with Delete).
// NetworkPolicies (one per TrainingJob, guarding its ranks) are applied,
// and deleted only when the operator runs with them turned off.
// +kubebuilder:rbac:groups=training.mlplatform.dev,resources=trainingjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=training.mlplatform.dev,resources=trainingjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=training.mlplatform.dev,resources=trainingjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs;tfjobs;xgboostjobs;paddlejobs;mpijobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;deletecollection
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestores,verbs=get;list;watch

// Reconciler turns each TrainingJob into one child per run on its backend
// (an Indexed Job, or a Kubeflow job) and reports the run's progress in the
// TrainingJob's status.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	Settings  backend.Settings
	// Backends are the backends this operator runs, with the default for
	// jobs that name none. The Kubeflow backend is unavailable when its
	// CRDs were not installed at start: its kinds are then watched only
	// once the CRDs appear (kubeflow_arrival.go).
	Backends *backend.Registry
	// WatchesFeatureStores is false when the FeatureStore CRD was not
	// installed at start; waiting jobs then poll.
	WatchesFeatureStores bool
	// Refusals reads the children's events that say the API server
	// refused a pod; SetupWithManagerAs sets it, and nil reads none.
	Refusals *podrefusal.Watch
	// Namespaces limits the caches the operator builds beside the
	// manager's (the refusals' events, the pods that succeeded) to a
	// namespace-scoped install's namespaces
	// (manager.Config.CacheNamespaces); nil means every namespace.
	Namespaces map[string]cache.Config
	// WatchesWorkloads is false when Kueue's Workload CRD was not
	// installed at start; queued jobs then show no reason of Kueue's until
	// it appears (kueue_arrival.go), when workloadsArrived turns true.
	WatchesWorkloads bool
	workloadsArrived atomic.Bool
	// QueuePositionRefresh is how often a queued job's position in its
	// LocalQueue is read again from Kueue's visibility API (with up to 20%
	// jitter); one read of a LocalQueue serves its jobs for half of it.
	QueuePositionRefresh time.Duration
	// WorkloadGrace is how long a queued child may stay without a Kueue
	// Workload before the job is Stalled (awaitWorkload); zero means
	// DefaultWorkloadGrace.
	WorkloadGrace time.Duration
	// Visibility reads Kueue's visibility API.
	Visibility dynamic.Interface
	// NetworkPolicy gives every TrainingJob a NetworkPolicy that admits to
	// its ranks only its own ranks (--rank-network-policy).
	NetworkPolicy bool
	// FailedPodsGrace is how long the failure of a run whose child counts
	// more failed pods than the operator's cache holds waits for the
	// cache's watch of pods to catch up, counted from the time the child
	// recorded the failure (awaitFailedPods); zero means
	// DefaultFailedPodsGrace.
	FailedPodsGrace time.Duration
	// RankNamesPeriod paces the writes of a native run's rank host names
	// (rankdns.Reconciler.Period); zero means rankdns.DefaultPeriod.
	RankNamesPeriod time.Duration
	// Clock is the clock for TTLs and backoffs; tests move it.
	Clock        clock.PassiveClock
	Metrics      *Metrics
	PhaseMetrics *phase.Metrics

	runner *phase.Runner[*trainingv1alpha1.TrainingJob, *scope]
	// positions caches the LocalQueues' pending workloads.
	positions *kueue.Positions

	// reported remembers per TrainingJob the issues already told (pod
	// issues, names taken), so a pod that stays unschedulable is reported
	// once, and since when a failed run waits for its failed pods
	// (awaitFailedPods). It is deliberately in memory: after a restart an
	// issue that persists is worth one more event, and a wait one more
	// grace. It is keyed by name, so that the reconcile of a job that is
	// gone, which knows only the name, forgets it.
	reportedMu sync.Mutex
	reported   map[types.NamespacedName]*jobMemory

	// runPodsIndexed says the manager's cache indexes pods by run
	// (runPodsField).
	runPodsIndexed bool
	// succeededPods caches the metadata of the operator's pods that
	// succeeded, which the manager's cache of pods leaves out
	// (CacheFields), indexed by run; SetupWithManagerAs sets it.
	succeededPods client.Reader
}

// NewReconciler wires a Reconciler to a manager, with both backends
// registered and def the default for jobs that name none. FeatureStores are
// watched only when their CRD is installed, so the operator runs without
// the FeatureStore operator; likewise the Kubeflow kinds.
func NewReconciler(mgr ctrl.Manager, settings backend.Settings, def trainingv1alpha1.Backend) (*Reconciler, error) {
	missing := map[string]error{}
	for _, obj := range kubeflowjob.NewBackend(settings, nil).Owned() {
		if !installed(mgr, obj) {
			gvk, err := mgr.GetClient().GroupVersionKindFor(obj)
			if err != nil {
				return nil, err
			}
			missing[gvk.Kind] = kubeflowMissing(gvk)
		}
	}
	backends, err := backend.NewRegistry(def, nativejob.NewBackend(settings), kubeflowjob.NewBackend(settings, missing))
	if err != nil {
		return nil, err
	}
	phaseMetrics, err := phase.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return nil, err
	}
	visibility, err := dynamic.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorderFor(settings.OperatorName),
		Settings:      settings,
		Backends:      backends,
		NetworkPolicy: true,
		Clock:         clock.RealClock{},
		Metrics:       NewMetrics(),
		PhaseMetrics:  phaseMetrics,

		QueuePositionRefresh: DefaultQueuePositionRefresh,
		Visibility:           visibility,
	}
	if err := metrics.Replace(NewPhaseCollector(mgr.GetCache())); err != nil {
		return nil, err
	}
	fs := &unstructured.Unstructured{}
	fs.SetGroupVersionKind(featureref.GVK)
	r.WatchesFeatureStores = installed(mgr, fs)
	r.WatchesWorkloads = installed(mgr, newWorkload())
	return r, nil
}

// kubeflowMissing explains a cluster that does not serve the Kubeflow job
// kind gvk.
func kubeflowMissing(gvk schema.GroupVersionKind) error {
	return fmt.Errorf("the Kubeflow training-operator's %s CRD (%s) is not installed in this cluster: install it (the chart's kubeflow.enabled; the operator starts the kind when it appears), or use backend: native", gvk.Kind, gvk.GroupVersion())
}

// kubeflowDeparted explains a Kubeflow job kind gvk whose CRD was deleted
// while the operator ran: the API server deleted the kind's jobs, and with
// them their pods.
func kubeflowDeparted(gvk schema.GroupVersionKind) error {
	return fmt.Errorf("the Kubeflow training-operator's %s CRD (%s) is no longer served in this cluster: it was deleted, and the API server deleted every %s with it, "+
		"pods included; install it again (the chart's kubeflow.enabled, or the training-operator's manifests): the job then gets a new %s for its current run "+
		"(which starts from its last checkpoint, if it keeps one), without counting a restart; or recreate the job with backend: native", gvk.Kind, gvk.GroupVersion(), gvk.Kind, gvk.Kind)
}

// OwnedObjects are the kinds the operator creates, for shared/manager's
// label-restricted caches.
func OwnedObjects() []client.Object {
	owned := []client.Object{&corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.Secret{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}, &discoveryv1.EndpointSlice{}}
	return append(owned, nativejob.NewBackend(backend.Settings{}).Owned()...)
}

// OptionalOwnedObjects are the Kubeflow job kinds, cached only where their
// CRDs are installed: the operator runs without them.
func OptionalOwnedObjects() []client.Object {
	return kubeflowjob.NewBackend(backend.Settings{}, nil).Owned()
}

func installed(mgr ctrl.Manager, obj client.Object) bool { return crdarrival.Served(mgr, obj) }

// SetupWithManager registers the controller and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return r.SetupWithManagerAs(mgr, opts, r)
}

// SetupWithManagerAs registers the controller with do as the reconciler
// that the workqueue calls, such as r wrapped by a benchmark that times
// each reconcile.
func (r *Reconciler) SetupWithManagerAs(mgr ctrl.Manager, opts controller.Options, do reconcile.Reconciler) error {
	// The Runner is built here, once, from the fields as the caller left
	// them after NewReconciler (tests swap the client or the clock).
	r.runner = r.newRunner()
	if err := indexRunPods(context.Background(), mgr); err != nil {
		return err
	}
	r.runPodsIndexed = true
	succeeded, err := r.cacheSucceededPods(mgr)
	if err != nil {
		return err
	}
	if r.QueuePositionRefresh > 0 {
		r.positions = kueue.NewPositions(kueue.VisibilityFetch(r.Visibility), r.QueuePositionRefresh/2, r.Clock)
	}
	// Our own status writes change neither generation, labels nor
	// annotations, so they start no reconcile; what a status write decided
	// is acted on in the same reconcile or by its requeue.
	b := ctrl.NewControllerManagedBy(mgr).
		For(&trainingv1alpha1.TrainingJob{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&trainingv1alpha1.TrainingJob{}, phase.UnreconciledFirst()).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToTrainingJob), builder.WithPredicates(podMatters())).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(podToTrainingJob), builder.WithPredicates(deletedOnly())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(podToTrainingJob), builder.WithPredicates(deletedOnly())).
		Owns(&networkingv1.NetworkPolicy{}, builder.WithPredicates(policyChanged())).
		WatchesRawSource(succeeded).
		WithOptions(opts).
		Named(Name)
	if err := r.watchRefusals(mgr, b); err != nil {
		return err
	}
	for _, obj := range r.Backends.Owned() {
		b = b.Owns(obj, builder.WithPredicates(r.childMatters()))
	}
	if r.WatchesFeatureStores {
		if err := featureref.Index(context.Background(), mgr.GetFieldIndexer(), &trainingv1alpha1.TrainingJob{}, func(tj *trainingv1alpha1.TrainingJob) []commonv1alpha1.FeatureStoreReference {
			return tj.Spec.FeatureStores
		}); err != nil {
			return err
		}
		fs := &unstructured.Unstructured{}
		fs.SetGroupVersionKind(featureref.GVK)
		b = b.Watches(fs, handler.EnqueueRequestsFromMapFunc(featureref.Referrers(r.Client, func() *trainingv1alpha1.TrainingJobList {
			return &trainingv1alpha1.TrainingJobList{}
		})))
	}
	if r.WatchesWorkloads {
		b = b.Watches(newWorkload(), handler.EnqueueRequestsFromMapFunc(workloadToTrainingJob))
	}
	var arrivals []*crdarrival.Arrival
	for _, a := range append(r.kubeflowArrivals(), r.kueueArrival()) {
		if a != nil {
			arrivals = append(arrivals, a.Register(b))
		}
	}
	c, err := b.Build(tracing.Reconciler(Name, panics.Reconciler(mgr, Name, &trainingv1alpha1.TrainingJob{}, do)))
	if err != nil {
		return err
	}
	// The ranks of the native backend's runs find each other by the host
	// names that the operator publishes.
	names := &rankdns.Reconciler{Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder, OperatorName: r.Settings.OperatorName, Period: r.RankNamesPeriod}
	if err := names.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	for _, a := range arrivals {
		if err := a.Start(mgr, c, Name); err != nil {
			return err
		}
	}
	return nil
}

// podToTrainingJob maps a pod of a run to its TrainingJob through the label
// every generated pod template carries.
func podToTrainingJob(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[trainingv1alpha1.LabelJobName]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// newRunner builds the Runner of every reconcile: the steps, which share
// one reconcile's scope, in order, ending with the status they add up to;
// one status write, then the events and metrics of what it persisted. A
// stale scope lags a decision already recorded, or the failed pods of a
// failed run: the reconcile that sees them computes the status, and this
// one reports nothing.
func (r *Reconciler) newRunner() *phase.Runner[*trainingv1alpha1.TrainingJob, *scope] {
	return &phase.Runner[*trainingv1alpha1.TrainingJob, *scope]{
		Controller: Name,
		Client:     r.Client,
		APIReader:  r.APIReader,
		Recorder:   r.Recorder,
		Clock:      r.Clock,
		Metrics:    r.PhaseMetrics,
		Phases: []phase.Phase[*scope]{
			phase.Step("resolveBackend", r.resolveBackend),
			phase.Step("observeJob", r.observeJob),
			phase.Step("checkpointClaim", r.checkpointClaim),
			phase.Step("ensureMPIKeys", r.ensureMPIKeys),
			phase.Step("ensureNetworkPolicy", r.ensureNetworkPolicy),
			phase.Step("createJob", r.createJob),
			phase.Step("retirePreviousRun", r.retirePreviousRun),
			phase.Step("observePods", r.observePods),
			phase.Step("decideRunEnd", r.decideRunEnd),
			phase.Step("convergeQueueLabel", r.convergeQueueLabel),
			phase.Step("releaseWorkloads", r.releaseWorkloads),
			phase.Step("convergeSuspend", r.convergeSuspend),
			phase.Step("observeWorkload", r.observeWorkload),
			{Name: "status", Always: true, Run: func(_ context.Context, s *scope) (phase.Result, error) {
				if !s.stale {
					setStatus(s.tj, s.observation())
				}
				return phase.Result{}, nil
			}},
		},
		ObservedGeneration: func(s *scope) *int64 {
			if s.stale {
				return nil
			}
			return &s.tj.Status.ObservedGeneration
		},
		Events: r.events,
		AfterWrite: func(s *scope, before, tj *trainingv1alpha1.TrainingJob, statusWritten bool) {
			if s.stale {
				return
			}
			if statusWritten {
				r.Metrics.observeTransitions(before, tj, r.Settings.Catalog, r.Clock.Now())
				r.Metrics.observeAdmission(before, tj, s)
			}
			if s.created {
				r.Metrics.Created.WithLabelValues(tj.Namespace, string(tj.Spec.Framework)).Inc()
			}
		},
	}
}

// Reconcile converges one TrainingJob: get, phases, one status write, then
// events; no finalizer, because everything it creates is owned and
// cascades with it. What needs the outcome persisted (cleaning the pods of
// a finished job, its TTL) runs after the write.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tj := &trainingv1alpha1.TrainingJob{}
	if err := patch.Get(ctx, r.Client, r.APIReader, req.NamespacedName, tj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tj.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	s := newScope(tj, r.Clock.Now())
	result, err := r.runner.Run(ctx, tj, s)
	if err != nil || s.stale {
		return result, err
	}
	if s.end != nil {
		// The decision just recorded is acted on by the next reconcile
		// (retire the ended run, wait out the backoff, create the next
		// run); our own status write wakes nothing, so ask for it.
		result = requeue.Shortest(result, ctrl.Result{RequeueAfter: decisionRequeue})
	}
	if finished(tj) {
		// The outcome is recorded now, so the pods may go.
		if _, err := r.cleanPods(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	ttl, err := r.expireTTL(ctx, tj)
	if err != nil {
		return ctrl.Result{}, err
	}
	return requeue.Shortest(result, ttl), nil
}

func (r *Reconciler) forget(job types.NamespacedName) {
	r.reportedMu.Lock()
	defer r.reportedMu.Unlock()
	delete(r.reported, job)
}

// podMatters passes the pod events that change what the operator records
// or does: a pod that fails (it explains a failed run, whose record waits
// for it: awaitFailedPods) or is deleted (the next run waits for the
// previous run's pods), and a new pod problem to re-emit. A pod seen first
// when it has already failed (a relist after a lost watch lists it so)
// counts as one that fails. A pod that succeeds changes nothing the child's own status,
// which is watched, does not say; a next run that waits for the previous
// run's pods also looks again every previousRunPollInterval. Every other
// pod status change is summed up in the child's status too.
func podMatters() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e ctrlevent.CreateEvent) bool {
			p, ok := e.Object.(*corev1.Pod)
			return ok && podFailed(p)
		},
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			before, ok1 := e.ObjectOld.(*corev1.Pod)
			after, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return true
			}
			if podFailed(before) != podFailed(after) || before.DeletionTimestamp.IsZero() != after.DeletionTimestamp.IsZero() {
				return true
			}
			return !slices.Equal(issueKeys(before), issueKeys(after))
		},
		// A pod that succeeds leaves the cache of pods (CacheFields) with
		// a deletion event that carries its last state there, as the API
		// server sends it: running, and not being deleted. It wakes
		// nothing, as its update to Succeeded did not before: the Job's
		// status says when the run succeeded. The end of a graceful
		// deletion, a failed pod's deletion and a tombstone after a lost
		// watch still wake the job. A pod removed at once (grace period
		// 0: forced, or never scheduled) looks like one that succeeded and
		// wakes nothing either; the Job's status says what its removal
		// means, and a job that waits for its previous run's pods to go
		// polls for them.
		DeleteFunc: func(e ctrlevent.DeleteEvent) bool {
			p, ok := e.Object.(*corev1.Pod)
			return !ok || e.DeleteStateUnknown || !p.DeletionTimestamp.IsZero() || p.Status.Phase == corev1.PodFailed
		},
		GenericFunc: func(ctrlevent.GenericEvent) bool { return true },
	}
}

func podFailed(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed }

func issueKeys(p *corev1.Pod) []string {
	var keys []string
	for _, is := range podIssues([]corev1.Pod{*p}) {
		keys = append(keys, is.key)
	}
	return keys
}

// deletedOnly passes deletions: a companion deleted mid-run is created
// again by the next reconcile.
func deletedOnly() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
		UpdateFunc:  func(ctrlevent.UpdateEvent) bool { return false },
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return true },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	}
}

// childMatters passes the child updates that change what its backend
// observes (the run's state, its suspend flag, its pod counts where they
// are recorded), its labels (the queue label, the cache's label) or its
// deletion. A Job's status changes with every pod; most of those changes
// change nothing the operator records, and waking for them would cost a
// reconcile each. The start time alone is one of them: the child records
// it in its first status write, before the run is Running, and the
// reconcile that records Running reads it then. So is every change after
// the run ended (the Job's Complete after SuccessCriteriaMet, Failed after
// FailureTarget): the reconcile that saw the end recorded it, and a
// recorded outcome is final. A child's creation wakes nothing either: the
// operator created it in a reconcile that recorded it, and after a restart
// every TrainingJob is reconciled anyway.
func (r *Reconciler) childMatters() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(ctrlevent.CreateEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			if !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) || e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() {
				return true
			}
			before, ok1 := r.Backends.Observe(e.ObjectOld)
			after, ok2 := r.Backends.Observe(e.ObjectNew)
			if !ok1 || !ok2 {
				return true
			}
			if before.Finished() && after.Finished() {
				return false
			}
			before.StartTime, after.StartTime = nil, nil
			return !equality.Semantic.DeepEqual(before, after)
		},
	}
}
