package featurestore

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

// ForeignObjectError says a child's name is taken by an object that is not
// this FeatureStore's (no controller reference to it): somebody else's,
// perhaps a tenant's. It is never adopted, overwritten or read as ours.
type ForeignObjectError struct{ Kind, Namespace, Name string }

func (e *ForeignObjectError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and does not belong to this FeatureStore; it is left untouched. "+
		"Delete or rename it, or give the FeatureStore another name", e.Kind, e.Namespace, e.Name)
}

// IsForeign reports whether err is, or wraps, a ForeignObjectError.
func IsForeign(err error) bool {
	var f *ForeignObjectError
	return errors.As(err, &f)
}

// checkControlled returns a ForeignObjectError unless obj, an existing
// object of kind, is controlled by fs.
func checkControlled(fs *featuresv1alpha1.FeatureStore, obj client.Object, kind string) error {
	if metav1.IsControlledBy(obj, fs) {
		return nil
	}
	return &ForeignObjectError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// checkLive reads key from the API server, past the cache, which holds only
// objects labelled as the operator's: an object it does not see may still
// exist. It returns a ForeignObjectError when the object exists and is not
// fs's, and nil when it does not exist or is fs's.
func (r *Reconciler) checkLive(ctx context.Context, fs *featuresv1alpha1.FeatureStore, obj client.Object, kind string) error {
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return checkControlled(fs, obj, kind)
}

// created interprets the error of creating a child: AlreadyExists means
// either a foreign object the cache does not show, or ours created by an
// earlier reconcile that the cache has not caught up with (retried).
func (r *Reconciler) created(ctx context.Context, fs *featuresv1alpha1.FeatureStore, obj client.Object, kind string, err error) error {
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	if foreign := r.checkLive(ctx, fs, obj, kind); foreign != nil {
		return foreign
	}
	return err
}
