package featurestorebackend

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/backends"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/patch"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/tracing"
)

// FinalizerName keeps a deleted backend while FeatureStores use it. It is
// released only when none is left, so their cleanup can always resolve the
// server and its admin credentials.
const FinalizerName = "features.mlplatform.dev/in-use"

// DefaultCheckInterval is how often a backend's server is checked again
// when nothing changed: a server or a role changes outside Kubernetes, where
// no watch sees it.
const DefaultCheckInterval = 5 * time.Minute

// Reconciler reconciles FeatureStoreBackends.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	Backends  *backends.Resolver
	// AdminSecrets caches the Secrets of the operator's namespace, where
	// the admin Secrets live.
	AdminSecrets cache.Cache
	// Namespace is the operator's namespace, which also holds handed-off
	// cleanups.
	Namespace string
	// CheckInterval is how often the server is checked again.
	CheckInterval time.Duration
	// PhaseMetrics times the reconcile's phases; nil records nothing.
	PhaseMetrics *phase.Metrics

	finalizer *finalizer.Finalizer
	runner    *phase.Runner[*featuresv1alpha1.FeatureStoreBackend, *scope]
}

// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestorebackends,verbs=get;list;watch;update;patch
// The admission policy abandon-cleanup.features.mlplatform.dev lets only
// holders of the abandon-cleanup verb remove FinalizerName: the operator
// removes it when no FeatureStore uses the backend.
// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestorebackends,verbs=abandon-cleanup
// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestorebackends/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=features.mlplatform.dev,resources=featurestores,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller and its watches: the backends,
// the FeatureStores and handed-off cleanups that use them (their arrival
// and departure), and the admin Secrets.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.CheckInterval <= 0 {
		r.CheckInterval = DefaultCheckInterval
	}
	// The backend's "cleanup" is the end of a wait: while it is used, the
	// finalizer's Blocked keeps it with its own condition, not a failure.
	r.finalizer = &finalizer.Finalizer{
		Name: FinalizerName, Cleanup: r.inUse, Released: "No FeatureStore uses the backend any more",
		Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder,
	}
	r.runner = r.newRunner()
	arrivals := predicate.Funcs{
		CreateFunc:  func(ctrlevent.CreateEvent) bool { return true },
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return true },
		UpdateFunc:  func(ctrlevent.UpdateEvent) bool { return false },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	}
	pending := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && o.GetLabels()[claims.LabelPendingCleanup] == "true"
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&featuresv1alpha1.FeatureStoreBackend{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, claims.FinalizersChanged))).
		Watches(&featuresv1alpha1.FeatureStore{}, handler.EnqueueRequestsFromMapFunc(r.backendsOfStore),
			builder.WithPredicates(arrivals)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.backendsOfPendingCleanup),
			builder.WithPredicates(pending, arrivals)).
		WatchesRawSource(source.Kind(r.AdminSecrets, &corev1.Secret{},
			handler.TypedEnqueueRequestsFromMapFunc(r.backendsOfAdminSecret))).
		WithOptions(opts).
		Named("featurestorebackend").
		Complete(tracing.Reconciler("featurestorebackend", panics.Reconciler(mgr, "featurestorebackend", &featuresv1alpha1.FeatureStoreBackend{}, r)))
}

func requests(names []string) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(names))
	for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return out
}

func (r *Reconciler) backendsOfStore(_ context.Context, o client.Object) []reconcile.Request {
	return requests(claims.BackendNames(o.(*featuresv1alpha1.FeatureStore)))
}

func (r *Reconciler) backendsOfPendingCleanup(_ context.Context, o client.Object) []reconcile.Request {
	plan, ok := planOf(o.(*corev1.ConfigMap))
	if !ok {
		return nil
	}
	return requests(plan.Backends())
}

func (r *Reconciler) backendsOfAdminSecret(ctx context.Context, s *corev1.Secret) []reconcile.Request {
	list := &featuresv1alpha1.FeatureStoreBackendList{}
	if err := r.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing FeatureStoreBackends")
		return nil
	}
	var names []string
	for i := range list.Items {
		if backends.AdminSecretName(&list.Items[i]) == s.Name {
			names = append(names, list.Items[i].Name)
		}
	}
	return requests(names)
}

func planOf(cm *corev1.ConfigMap) (cleanup.Plan, bool) {
	var plan cleanup.Plan
	if err := json.Unmarshal([]byte(cm.Data[claims.PlanKey]), &plan); err != nil {
		return plan, false
	}
	return plan, true
}

// Reconcile converges one FeatureStoreBackend.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &featuresv1alpha1.FeatureStoreBackend{}
	if err := patch.Get(ctx, r.Client, r.APIReader, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return r.finalizer.Finalize(ctx, b)
	}
	if added, err := r.finalizer.Ensure(ctx, b); added || err != nil {
		return ctrl.Result{}, err
	}

	return r.runner.Run(ctx, b, &scope{backend: b})
}

// newRunner builds the Runner of every reconcile: who uses the backend,
// what its server says, and the status they add up to, written once, then
// the events of the backend's condition transitions. A backend is checked
// again after CheckInterval, as no watch sees a server change.
func (r *Reconciler) newRunner() *phase.Runner[*featuresv1alpha1.FeatureStoreBackend, *scope] {
	return &phase.Runner[*featuresv1alpha1.FeatureStoreBackend, *scope]{
		Controller: "featurestorebackend",
		Client:     r.Client,
		APIReader:  r.APIReader,
		Recorder:   r.Recorder,
		Metrics:    r.PhaseMetrics,
		Phases: []phase.Phase[*scope]{
			{Name: "observeUsers", Run: func(ctx context.Context, s *scope) (phase.Result, error) {
				// A failed list from the cache says nothing about the
				// server: retry without touching the status.
				err := r.observeUsers(ctx, s)
				return phase.Result{Stop: err != nil}, err
			}},
			{Name: "checkServer", Run: func(ctx context.Context, s *scope) (phase.Result, error) {
				return phase.Result{}, r.checkServer(ctx, s)
			}},
			{Name: "status", Always: true, Run: func(_ context.Context, s *scope) (phase.Result, error) {
				computeStatus(s.backend, s.observations())
				s.computed = true
				return phase.Result{RequeueAfter: r.CheckInterval}, nil
			}},
		},
		ObservedGeneration: func(s *scope) *int64 {
			if !s.computed {
				return nil
			}
			return &s.backend.Status.ObservedGeneration
		},
		Events: phase.OnConditions[*scope, *featuresv1alpha1.FeatureStoreBackend](transitionEvents),
	}
}

// inUse is the backend's cleanup: nothing is removed, but the backend stays
// while FeatureStores or handed-off cleanups use it, so that their cleanup
// can always resolve the server and its admin credentials. The finalizer
// says who in a condition and an event; the watches on FeatureStores and
// handed-off cleanups bring the backend back when one of them goes.
func (r *Reconciler) inUse(ctx context.Context, obj finalizer.Object) error {
	b, ok := obj.(*featuresv1alpha1.FeatureStoreBackend)
	if !ok {
		return fmt.Errorf("featurestorebackend: cleanup of a %T", obj)
	}
	s := &scope{backend: b}
	if err := r.observeUsers(ctx, s); err != nil {
		return err
	}
	if s.users.empty() {
		return nil
	}
	return deletionBlocked(b, s.users)
}
