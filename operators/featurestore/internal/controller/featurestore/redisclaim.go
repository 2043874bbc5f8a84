package featurestore

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
)

// checkRedisClaim refuses the online store when an older FeatureStore (or
// the handed-off cleanup of a deleted one) holds a colliding project on
// the same backend. The message names nothing of the other store (its
// project, namespace, name, UID or the record that holds its claim, whose
// name carries the UID): it may belong to another tenant. The operator's
// log names the record for the administrator who releases it.
func (r *Reconciler) checkRedisClaim(ctx context.Context, fs *featuresv1alpha1.FeatureStore) error {
	backend := fs.Spec.OnlineStore.Backend
	held, err := claims.RedisClaims(ctx, r.Client, r.APIReader, r.Namespace, backend)
	if err != nil {
		return err
	}
	other, ahead := cleanup.ClaimedAhead(claims.StoreClaim(fs), held)
	if !ahead {
		return nil
	}
	what, remedy := "another FeatureStore created earlier", ""
	switch {
	case other.Pending:
		what = "the unfinished cleanup of a deleted FeatureStore"
	case other.Retained:
		what = "the keys a deleted FeatureStore kept (deletionPolicy Retain)"
		remedy = fmt.Sprintf("; or have an administrator remove or hand over those keys and release them by deleting the ConfigMap "+
			"labelled %s=true in namespace %s that holds them (the operator's log names it)", claims.LabelRetainedClaim, r.Namespace)
		ctrl.LoggerFrom(ctx).Info("The online store's project collides with keys a deleted FeatureStore retained; deleting the record releases them",
			"record", other.Record, "project", fs.Spec.Project, "backend", backend)
	}
	return &redis.ConflictError{Reason: fmt.Sprintf(
		"project %q collides with the project of %s on Redis backend %s, one being a suffix of the other: Feast appends the project to every key, so both would share keys. "+
			"Choose a project that is not a suffix of, and does not end with, another project on this backend%s",
		fs.Spec.Project, what, backend, remedy)}
}

var deletedOnly = predicate.Funcs{
	CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
	UpdateFunc:  func(ctrlevent.UpdateEvent) bool { return false },
	GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
}

// waitingForClaim maps a deleted FeatureStore, a finished handed-off
// cleanup or a released retained claim, to the stores on the same Redis backend whose projects collide
// with it: one of them may hold the claim now.
func (r *Reconciler) waitingForClaim(ctx context.Context, o client.Object) []reconcile.Request {
	var plan cleanup.Plan
	switch obj := o.(type) {
	case *featuresv1alpha1.FeatureStore:
		plan = cleanup.PlanFor(obj)
	case *corev1.ConfigMap:
		rec, ok := claims.RecordedClaim(obj)
		if obj.Namespace != r.Namespace || !ok {
			return nil
		}
		plan = rec.Plan
	}
	if plan.Redis == "" {
		return nil
	}
	held, err := claims.RedisClaims(ctx, r.Client, r.Client, r.Namespace, plan.Redis)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the claims of a Redis backend", "backend", plan.Redis)
		return nil
	}
	var out []reconcile.Request
	for _, c := range held {
		ns, name, _ := strings.Cut(c.Owner, "/")
		if !c.Pending && !c.Retained && c.UID != plan.UID && cleanup.Collide(c.Project, plan.Project) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return out
}
