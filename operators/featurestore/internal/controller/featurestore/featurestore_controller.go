package featurestore

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
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
	"sigs.k8s.io/controller-runtime/pkg/source"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/backends"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/patch"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/tracing"
)

// OperatorName labels everything the operator creates.
const OperatorName = "featurestore-operator"

// FinalizerName guards the cleanup of provisioned databases and users.
const FinalizerName = "features.mlplatform.dev/cleanup"

// Labels on the operator's children.
const (
	// LabelFeatureStore names the FeatureStore a child belongs to.
	LabelFeatureStore = "features.mlplatform.dev/featurestore"
)

// Defaults of the Reconciler's durations.
const (
	DefaultGracePeriod   = 10 * time.Minute
	DefaultDriftInterval = 5 * time.Minute
)

// Images of managed servers.
type Images struct {
	Postgres string
	Redis    string
}

// Reconciler reconciles FeatureStores.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	Backends  *backends.Resolver
	Finalizer *finalizer.Finalizer

	// Namespace is the operator's namespace, where admin Secrets and
	// handed-off cleanups live.
	Namespace string
	// GracePeriod is how long old credentials keep working after a
	// rotation, long enough for mounted Secret files to refresh.
	GracePeriod time.Duration
	// DriftInterval is how often a Ready store is checked again, which
	// restores users lost by a server that restarted without its aclfile.
	DriftInterval time.Duration
	Images        Images
	// NetworkPolicy configures the managed servers' NetworkPolicy.
	NetworkPolicy NetworkPolicyOptions
	// CleanupFailures counts failed cleanups; nil counts nothing.
	CleanupFailures *claims.CleanupFailures
	// Clock says what time it is; NewReconciler sets the real one.
	Clock clock.PassiveClock
	// PhaseMetrics times the reconcile's phases.
	PhaseMetrics *phase.Metrics

	// adminSecrets watches Secrets in Namespace only.
	adminSecrets cache.Cache
	metrics      *StoreMetrics
	runner       *phase.Runner[*featuresv1alpha1.FeatureStore, *scope]
}

// Options configure NewReconciler.
type Options struct {
	Namespace     string
	GracePeriod   time.Duration
	DriftInterval time.Duration
	Images        Images
	NetworkPolicy NetworkPolicyOptions
}

// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestores,verbs=get;list;watch;update;patch
// The admission policy abandon-cleanup.features.mlplatform.dev lets only
// holders of the abandon-cleanup verb remove FinalizerName: the operator
// removes it when the cleanup is done.
// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestores,verbs=abandon-cleanup
// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestores/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestorebackends,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// NewReconciler wires a Reconciler to a manager. adminSecrets is the
// cache of Secrets in the operator's namespace (NewAdminSecretCache).
func NewReconciler(mgr ctrl.Manager, opts Options, adminSecrets cache.Cache) (*Reconciler, error) {
	phaseMetrics, err := phase.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorderFor("featurestore-controller"),
		Namespace:     opts.Namespace,
		GracePeriod:   orDefault(opts.GracePeriod, DefaultGracePeriod),
		DriftInterval: orDefault(opts.DriftInterval, DefaultDriftInterval),
		Images:        opts.Images,
		NetworkPolicy: opts.NetworkPolicy,
		adminSecrets:  adminSecrets,
		// Shared with the pending-cleanup controller (controller.Setup).
		CleanupFailures: claims.NewCleanupFailures(),
		Clock:           clock.RealClock{},
		metrics:         NewStoreMetrics(),
		PhaseMetrics:    phaseMetrics,
	}
	r.Backends = &backends.Resolver{Client: r.Client, Secrets: adminSecrets, Namespace: opts.Namespace}
	r.Finalizer = &finalizer.Finalizer{
		Name:      FinalizerName,
		Cleanup:   r.cleanup,
		Handoff:   r.handoff,
		Client:    r.Client,
		APIReader: r.APIReader,
		Recorder:  r.Recorder,
	}
	return r, nil
}

// NewAdminSecretCache adds to the manager a cache of the Secrets in the
// operator's namespace. The manager's own Secret cache holds only Secrets
// labelled as the operator's, so the admin Secrets, which the platform team
// creates, need this second, namespace-scoped one; both controllers watch
// it.
func NewAdminSecretCache(mgr ctrl.Manager, namespace string) (cache.Cache, error) {
	adminSecrets, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	// On every replica, so that a warm standby's controllers find it
	// synced.
	if err := manager.AddCache(mgr, adminSecrets); err != nil {
		return nil, err
	}
	return adminSecrets, nil
}

// WaitForAdminSecrets waits until the cache of admin Secrets has synced,
// as the controller does before its first reconcile; for callers of
// Reconcile itself, such as tests.
func (r *Reconciler) WaitForAdminSecrets(ctx context.Context) bool {
	return r.adminSecrets.WaitForCacheSync(ctx)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// SetupWithManager registers the controller and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	// The Runner is built here, once, from the fields as the caller left
	// them after NewReconciler (tests swap the client or the clock).
	r.runner = r.newRunner()
	if err := claims.IndexStoresByBackend(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Annotations (rotate, abandon) and finalizers (the skeleton
		// returns after adding ours) do not bump the generation, and
		// status writes should not cause another round of connections.
		For(&featuresv1alpha1.FeatureStore{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, claims.FinalizersChanged))).
		Watches(&featuresv1alpha1.FeatureStore{}, phase.UnreconciledFirst()).
		Owns(&corev1.Secret{}).
		Owns(&corev1.Service{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// A backend's own status writes matter only when its Ready
		// condition flips: stores waiting for the server retry at once.
		Watches(&featuresv1alpha1.FeatureStoreBackend{}, handler.EnqueueRequestsFromMapFunc(r.storesOfBackend),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, readyChanged))).
		// A store that lost a Redis claim waits for the claimant to go:
		// the claimant's deletion, or the end of its handed-off cleanup,
		// wakes the stores whose projects collide with it.
		Watches(&featuresv1alpha1.FeatureStore{}, handler.EnqueueRequestsFromMapFunc(r.waitingForClaim),
			builder.WithPredicates(deletedOnly)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.waitingForClaim),
			builder.WithPredicates(deletedOnly)).
		WatchesRawSource(source.Kind(r.adminSecrets, &corev1.Secret{},
			handler.TypedEnqueueRequestsFromMapFunc(r.storesOfAdminSecret))).
		WithOptions(opts).
		Named("featurestore").
		Complete(tracing.Reconciler("featurestore", panics.Reconciler(mgr, "featurestore", &featuresv1alpha1.FeatureStore{}, r)))
}

var readyChanged = predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
	before, after := e.ObjectOld.(*featuresv1alpha1.FeatureStoreBackend), e.ObjectNew.(*featuresv1alpha1.FeatureStoreBackend)
	return conditions.IsTrue(before, commonv1alpha1.ConditionReady) != conditions.IsTrue(after, commonv1alpha1.ConditionReady)
}}

func (r *Reconciler) storesOfBackend(ctx context.Context, o client.Object) []reconcile.Request {
	list := &featuresv1alpha1.FeatureStoreList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{claims.IndexBackends: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing FeatureStores of a backend", "backend", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, fs := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: fs.Namespace, Name: fs.Name}})
	}
	return out
}

func (r *Reconciler) storesOfAdminSecret(ctx context.Context, s *corev1.Secret) []reconcile.Request {
	list := &featuresv1alpha1.FeatureStoreBackendList{}
	if err := r.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing FeatureStoreBackends")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if b := &list.Items[i]; backends.AdminSecretName(b) == s.Name {
			out = append(out, r.storesOfBackend(ctx, b)...)
		}
	}
	return out
}

// Reconcile converges one FeatureStore.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fs := &featuresv1alpha1.FeatureStore{}
	if err := patch.Get(ctx, r.Client, r.APIReader, req.NamespacedName, fs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Reconciling FeatureStore", "generation", fs.Generation, "deleting", !fs.DeletionTimestamp.IsZero())
	if !fs.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, fs)
	}
	if added, err := r.Finalizer.Ensure(ctx, fs); added || err != nil {
		return ctrl.Result{}, err
	}

	s := &scope{fs: fs, now: r.Clock.Now()}
	return r.runner.Run(ctx, fs, s)
}

// newRunner builds the Runner of every reconcile: the steps, which share
// one reconcile's scope, in order, ending with the status they add up to;
// a Ready store is looked at again after DriftInterval. Every store step
// needs the credentials: without them the later steps are skipped and only
// the status is computed. A failing store step does not stop the others,
// whose stores are independent.
func (r *Reconciler) newRunner() *phase.Runner[*featuresv1alpha1.FeatureStore, *scope] {
	return &phase.Runner[*featuresv1alpha1.FeatureStore, *scope]{
		Controller: "featurestore",
		Client:     r.Client,
		APIReader:  r.APIReader,
		Recorder:   r.Recorder,
		Clock:      r.Clock,
		Metrics:    r.PhaseMetrics,
		Phases: []phase.Phase[*scope]{
			phase.Step("ensureCredentials", r.ensureCredentials),
			// The policy comes before the servers, so that new servers
			// start guarded.
			phase.Step("ensureNetworkPolicy", r.ensureNetworkPolicy),
			phase.Step("ensureOnlineStore", r.ensureOnlineStore),
			phase.Step("ensureOfflineStore", r.ensureOfflineStore),
			phase.Step("ensureRegistry", r.ensureRegistry),
			phase.Step("ensureClientConfig", r.ensureClientConfig),
			phase.Step("retireCredentials", r.retireCredentials),
			{Name: "status", Always: true, Run: func(_ context.Context, s *scope) (phase.Result, error) {
				ensureRecord(s.fs)
				computeStatus(s.fs, s.observations())
				if conditions.IsTrue(s.fs, commonv1alpha1.ConditionReady) {
					return phase.Result{RequeueAfter: r.DriftInterval}, nil
				}
				return phase.Result{}, nil
			}},
		},
		ObservedGeneration: func(s *scope) *int64 { return &s.fs.Status.ObservedGeneration },
		Halt:               func(s *scope, _ error) bool { return s.creds == nil },
		Events:             events,
	}
}
