package featurestore

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

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
