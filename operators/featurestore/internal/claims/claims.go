package featurestore

import (
	"context"
	"encoding/json"
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
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
)

// RedisClaims lists the claims on the key spaces of a Redis backend: the
// FeatureStores whose online store is on it, deleting ones included (their
// keys are there until their cleanup ran), read through the backend index
// of stores, and the cleanups handed off by deleted FeatureStores, read
// from pending, the operator's namespace. A store's informer delivers the
// stores in creation order, so the cache never holds a younger store
// without the older ones; handed-off cleanups are in another informer, and
// the FeatureStore controller reads them live (pending = its APIReader) so
// the removal of a store and the creation of its record cannot be seen in
// the wrong order.
func RedisClaims(ctx context.Context, stores, pending client.Reader, operatorNamespace, backend string) ([]cleanup.Claim, error) {
	list := &featuresv1alpha1.FeatureStoreList{}
	if err := stores.List(ctx, list, client.MatchingFields{IndexBackends: backend}); err != nil {
		return nil, fmt.Errorf("listing the FeatureStores of backend %s: %w", backend, err)
	}
	var out []cleanup.Claim
	for i := range list.Items {
		if fs := &list.Items[i]; fs.Spec.OnlineStore.Backend == backend {
			out = append(out, cleanup.ClaimOf(cleanup.PlanFor(fs), false))
		}
	}
	records := &corev1.ConfigMapList{}
	if err := pending.List(ctx, records, client.InNamespace(operatorNamespace),
		client.MatchingLabels{LabelPendingCleanup: "true"}); err != nil {
		return nil, fmt.Errorf("listing handed-off cleanups: %w", err)
	}
	for i := range records.Items {
		var plan cleanup.Plan
		// An unreadable record cannot claim anything; the pending-cleanup
		// controller reports it.
		if json.Unmarshal([]byte(records.Items[i].Data[PlanKey]), &plan) == nil && plan.Redis == backend {
			out = append(out, cleanup.ClaimOf(plan, true))
		}
	}
	return out, nil
}

// OwnsRedisKeys reports whether plan's store holds the claim on its
// project's key space on its Redis backend, which allows its cleanup to
// delete the keys.
func OwnsRedisKeys(ctx context.Context, stores, pending client.Reader, operatorNamespace string, plan cleanup.Plan, isPending bool) (bool, error) {
	if plan.Redis == "" {
		return false, nil
	}
	claims, err := RedisClaims(ctx, stores, pending, operatorNamespace, plan.Redis)
	if err != nil {
		return false, err
	}
	_, ahead := cleanup.ClaimedAhead(cleanup.ClaimOf(plan, isPending), claims)
	return !ahead, nil
}

// checkRedisClaim refuses the online store when an older FeatureStore (or
// the handed-off cleanup of a deleted one) holds a colliding project on
// the same backend. The message does not name the other store: it belongs
// to another tenant.
func (r *Reconciler) checkRedisClaim(ctx context.Context, fs *featuresv1alpha1.FeatureStore) error {
	backend := fs.Spec.OnlineStore.Backend
	claims, err := RedisClaims(ctx, r.Client, r.APIReader, r.Namespace, backend)
	if err != nil {
		return err
	}
	other, ahead := cleanup.ClaimedAhead(cleanup.ClaimOf(cleanup.PlanFor(fs), false), claims)
	if !ahead {
		return nil
	}
	what := "another FeatureStore created earlier"
	if other.Pending {
		what = "the unfinished cleanup of a deleted FeatureStore"
	}
	return &redis.ConflictError{Reason: fmt.Sprintf(
		"project %q collides with project %q of %s on Redis backend %s: Feast appends the project to every key, so both would share keys. "+
			"Choose a project that is not a suffix of, and does not end with, another project on this backend",
		fs.Spec.Project, other.Project, what, backend)}
}

var deletedOnly = predicate.Funcs{
	CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
	UpdateFunc:  func(ctrlevent.UpdateEvent) bool { return false },
	GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
}

// waitingForClaim maps a deleted FeatureStore, or a finished handed-off
// cleanup, to the stores on the same Redis backend whose projects collide
// with it: one of them may hold the claim now.
func (r *Reconciler) waitingForClaim(ctx context.Context, o client.Object) []reconcile.Request {
	var plan cleanup.Plan
	switch obj := o.(type) {
	case *featuresv1alpha1.FeatureStore:
		plan = cleanup.PlanFor(obj)
	case *corev1.ConfigMap:
		if obj.Namespace != r.Namespace || obj.Labels[LabelPendingCleanup] != "true" ||
			json.Unmarshal([]byte(obj.Data[PlanKey]), &plan) != nil {
			return nil
		}
	}
	if plan.Redis == "" {
		return nil
	}
	claims, err := RedisClaims(ctx, r.Client, r.Client, r.Namespace, plan.Redis)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the claims of a Redis backend", "backend", plan.Redis)
		return nil
	}
	var out []reconcile.Request
	for _, c := range claims {
		ns, name, _ := strings.Cut(c.Owner, "/")
		if !c.Pending && c.UID != plan.UID && cleanup.Collide(c.Project, plan.Project) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return out
}
