package pendingcleanup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/backends"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/tracing"
)

// Reconciler runs the handed-off cleanup recorded in a ConfigMap in the
// operator's namespace and deletes the ConfigMap once nothing is left.
// Failures are retried with the controller's backoff.
type Reconciler struct {
	Client    client.Client
	Recorder  record.EventRecorder
	Backends  *backends.Resolver
	Namespace string
	// CleanupFailures counts failed cleanups; nil counts nothing.
	CleanupFailures *claims.CleanupFailures
}

// SetupWithManager registers the controller for the operator's pending
// cleanup ConfigMaps only.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && o.GetLabels()[claims.LabelPendingCleanup] == "true"
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}, builder.WithPredicates(ours)).
		WithOptions(opts).
		Named("pendingcleanup").
		Complete(tracing.Reconciler("pendingcleanup", panics.Reconciler(mgr, "pendingcleanup", &corev1.ConfigMap{}, r)))
}

// Reconcile finishes one handed-off cleanup.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, req.NamespacedName, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Labels[claims.LabelPendingCleanup] != "true" {
		return ctrl.Result{}, nil
	}
	var plan cleanup.Plan
	if err := json.Unmarshal([]byte(cm.Data[claims.PlanKey]), &plan); err != nil {
		// A person must look at a record nobody can read; retrying
		// would not help.
		r.Recorder.Event(cm, corev1.EventTypeWarning, "InvalidPlan", "The pending cleanup record cannot be read: "+err.Error())
		return ctrl.Result{}, nil //nolint:nilerr // retrying cannot fix the record; the event asks a person to look

	}
	ownsKeys, err := claims.OwnsRedisKeys(ctx, r.Client, r.Client, r.Namespace, plan, true)
	if err != nil {
		return ctrl.Result{}, err
	}
	out, err := cleanup.Run(ctx, r.Backends, plan, ownsKeys)
	if err != nil {
		r.CleanupFailures.Count("pending_cleanup")
		r.Recorder.Event(cm, corev1.EventTypeWarning, "CleanupFailed", fmt.Sprintf("Cleanup of FeatureStore %s/%s is retried: %v", plan.Namespace, plan.Name, err))
		return ctrl.Result{}, err
	}
	if len(out.Untouched) > 0 {
		r.Recorder.Event(cm, corev1.EventTypeWarning, "CleanupConflict", "Left untouched: "+strings.Join(out.Untouched, "; "))
	}
	ctrl.LoggerFrom(ctx).Info("Finished a handed-off cleanup", "featureStore", plan.Namespace+"/"+plan.Name, "uid", plan.UID)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, cm))
}
