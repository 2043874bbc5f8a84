package featurestore

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/apply"
)

// annotationAppliedHash records the hash of what was last applied to a
// child (apply.Applier.HashAnnotation).
const annotationAppliedHash = "features.mlplatform.dev/applied-hash"

// applier writes the FeatureStore's children.
func (r *Reconciler) applier() *apply.Applier {
	return &apply.Applier{
		Client: r.Client, APIReader: r.APIReader,
		FieldOwner: OperatorName, HashAnnotation: annotationAppliedHash,
	}
}

// ownedBy is a FeatureStore's claim on its children: a controller
// reference to it. Anything else of a child's name is somebody else's,
// perhaps a tenant's, and is never adopted, overwritten or read as ours.
func ownedBy(fs *featuresv1alpha1.FeatureStore) apply.Owner {
	return apply.ControlledBy(fs, "FeatureStore")
}

// checkControlled returns an apply.ForeignError unless obj, an existing
// object of kind, is controlled by fs.
func checkControlled(fs *featuresv1alpha1.FeatureStore, obj client.Object, kind string) error {
	return apply.Check(obj, kind, ownedBy(fs))
}

// created interprets the error of creating a child: AlreadyExists means
// either a foreign object the cache does not show, or ours created by an
// earlier reconcile that the cache has not caught up with (retried).
func (r *Reconciler) created(ctx context.Context, fs *featuresv1alpha1.FeatureStore, obj client.Object, err error) error {
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	gvk, gvkErr := apiutil.GVKForObject(obj, r.Client.Scheme())
	if gvkErr != nil {
		return gvkErr
	}
	if foreign := r.applier().CheckLive(ctx, obj, gvk, ownedBy(fs)); foreign != nil {
		return foreign
	}
	return err
}
