package claims

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/shared/metrics"
)

// Labels, keys and indexes the FeatureStore, FeatureStoreBackend and
// pending-cleanup controllers share.
const (
	// LabelPendingCleanup marks a ConfigMap in the operator's namespace
	// that records cleanup handed off by a FeatureStore whose namespace
	// was deleted while its servers were unreachable.
	LabelPendingCleanup = "features.mlplatform.dev/pending-cleanup"
	// LabelRetainedClaim marks a ConfigMap in the operator's namespace
	// that keeps the Redis key space of a FeatureStore deleted with
	// deletionPolicy Retain claimed, because its keys are still on the
	// server; an administrator releases the key space by deleting it.
	LabelRetainedClaim = "features.mlplatform.dev/retained-claim"
	// PlanKey is the ConfigMap key of a handed-off cleanup plan, and of
	// the plan whose keys a retained claim keeps.
	PlanKey = "plan.json"
	// IndexBackends indexes FeatureStores by the backends they use; the
	// FeatureStoreBackend controller lists a backend's users with it.
	IndexBackends = "features.mlplatform.dev/backends"
)

// IndexStoresByBackend registers IndexBackends.
func IndexStoresByBackend(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &featuresv1alpha1.FeatureStore{}, IndexBackends,
		func(o client.Object) []string { return BackendNames(o.(*featuresv1alpha1.FeatureStore)) })
}

// BackendNames lists the backends a FeatureStore names, in spec order.
func BackendNames(fs *featuresv1alpha1.FeatureStore) []string {
	var out []string
	for _, b := range []string{fs.Spec.OnlineStore.Backend, fs.Spec.OfflineStore.Backend, fs.Spec.Registry.Backend} {
		if b != "" {
			out = append(out, b)
		}
	}
	return out
}

// FinalizersChanged passes updates that changed the finalizers: a
// reconcile returns after adding its finalizer and continues from the
// update, which does not bump the generation.
var FinalizersChanged = predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
	return !slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
}}

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
			out = append(out, StoreClaim(fs))
		}
	}
	for _, label := range []string{LabelPendingCleanup, LabelRetainedClaim} {
		records := &corev1.ConfigMapList{}
		if err := pending.List(ctx, records, client.InNamespace(operatorNamespace),
			client.MatchingLabels{label: "true"}); err != nil {
			return nil, fmt.Errorf("listing the claims recorded in %s: %w", operatorNamespace, err)
		}
		for i := range records.Items {
			if c, ok := RecordedClaim(&records.Items[i]); ok && c.Plan.Redis == backend {
				out = append(out, c.Claim)
			}
		}
	}
	return out, nil
}

// Recorded is a claim held by a ConfigMap in the operator's namespace,
// with the plan it holds.
type Recorded struct {
	cleanup.Claim
	Plan cleanup.Plan
}

// RecordedClaim reads the claim a handed-off cleanup or a retained claim
// holds. An unreadable record cannot claim anything: the pending-cleanup
// controller reports a broken hand-off, and a broken retained claim is
// the administrator's own edit.
func RecordedClaim(cm *corev1.ConfigMap) (Recorded, bool) {
	pending, retained := cm.Labels[LabelPendingCleanup] == "true", cm.Labels[LabelRetainedClaim] == "true"
	var plan cleanup.Plan
	if !pending && !retained || json.Unmarshal([]byte(cm.Data[PlanKey]), &plan) != nil {
		return Recorded{}, false
	}
	c := cleanup.ClaimOf(plan, pending)
	c.Retained = retained && !pending
	c.Record = cm.Namespace + "/" + cm.Name
	c.Granted = true
	return Recorded{Claim: c, Plan: plan}, true
}

// StoreClaim is a FeatureStore's claim on its Redis backend, granted once
// it served its online store or published its client configuration.
func StoreClaim(fs *featuresv1alpha1.FeatureStore) cleanup.Claim {
	c := cleanup.ClaimOf(cleanup.PlanFor(fs), false)
	c.Granted = fs.Status.ClientConfig != nil || meta.IsStatusConditionTrue(fs.Status.Conditions, featuresv1alpha1.ConditionOnlineStoreReady)
	return c
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
	self := cleanup.ClaimOf(plan, isPending)
	// A handed-off cleanup was granted; a store is as its own claim says.
	self.Granted = isPending
	for _, c := range claims {
		self.Granted = self.Granted || (c.UID == self.UID && c.Granted)
	}
	_, ahead := cleanup.ClaimedAhead(self, claims)
	return !ahead, nil
}

// CleanupFailures counts failed attempts to remove what a FeatureStore
// provisioned, by origin (featurestore or pending_cleanup). Setup creates
// it once and hands it to both controllers.
type CleanupFailures struct{ vec *prometheus.CounterVec }

// NewCleanupFailures creates mlplatform_featurestore_cleanup_failures_total
// on controller-runtime's registry (a second manager in one process, as in
// tests, shares the series).
func NewCleanupFailures() *CleanupFailures {
	return &CleanupFailures{vec: metrics.NewCounterVec("featurestore", "cleanup_failures_total",
		"Failed attempts to remove what a FeatureStore provisioned, by origin (featurestore or pending_cleanup).", "origin")}
}

// Count counts one failed attempt; a nil CleanupFailures counts nothing.
func (c *CleanupFailures) Count(origin string) {
	if c != nil {
		c.vec.WithLabelValues(origin).Inc()
	}
}
