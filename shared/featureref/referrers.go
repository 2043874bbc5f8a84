package featureref

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// Index registers the IndexKey index on obj's kind: the names of the
// FeatureStores each object references, as refs reads them.
func Index[T client.Object](ctx context.Context, indexer client.FieldIndexer, obj T, refs func(T) []commonv1alpha1.FeatureStoreReference) error {
	return indexer.IndexField(ctx, obj, IndexKey, func(o client.Object) []string {
		return IndexValues(refs(o.(T)))
	})
}

// Referrers maps a FeatureStore to the objects that reference it: those of
// newList's kind in its namespace, found through the IndexKey index, so a
// change of the store wakes exactly the Notebooks or TrainingJobs that use
// it.
func Referrers[L client.ObjectList](c client.Reader, newList func() L) handler.MapFunc {
	return func(ctx context.Context, store client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(store.GetNamespace()), client.MatchingFields{IndexKey: store.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the objects that reference a FeatureStore", "featureStore", store.GetName())
			return nil
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Reading the objects that reference a FeatureStore", "featureStore", store.GetName())
			return nil
		}
		out := make([]reconcile.Request, 0, len(items))
		for _, item := range items {
			if o, ok := item.(client.Object); ok {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
			}
		}
		return out
	}
}
