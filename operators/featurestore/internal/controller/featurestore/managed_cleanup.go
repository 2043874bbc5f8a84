package featurestore

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;patch;delete

// managedServerNames are the StatefulSets (and their Services and Secrets)
// of the FeatureStore's managed servers.
func managedServerNames(fs *featuresv1alpha1.FeatureStore) []string {
	var out []string
	if fs.Spec.OfflineStore.Managed != nil || fs.Spec.Registry.Managed != nil {
		out = append(out, managedPostgresName(fs.Name))
	}
	if fs.Spec.OnlineStore.Managed != nil {
		out = append(out, managedRedisName(fs.Name))
	}
	return out
}

// dataVolumes lists the PersistentVolumeClaims the StatefulSet controller
// created from a managed server's volume claim template, which carries the
// server's labels. They are read from the API server: the operator caches
// no PersistentVolumeClaims, and this runs once per deletion.
func (r *Reconciler) dataVolumes(ctx context.Context, fs *featuresv1alpha1.FeatureStore, server string) ([]corev1.PersistentVolumeClaim, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(fs.Namespace), client.MatchingLabels{
		LabelFeatureStore:             fs.Name,
		"app.kubernetes.io/name":      server,
		"app.kubernetes.io/component": managedServerComponent,
	}); err != nil {
		return nil, fmt.Errorf("listing the volumes of %s: %w", server, err)
	}
	return list.Items, nil
}

// deleteManagedVolumes removes the managed servers' data under the Delete
// policy. The StatefulSet goes first so that its controller creates no
// volume again; then the claims, which the PVC protection keeps until the
// server's pod is gone. This does not rely on the StatefulSet's own
// retention policy, which its controller applies to the claims' owner
// references asynchronously: a policy changed just before the deletion
// would otherwise keep, or lose, the data against the FeatureStore's
// policy.
func (r *Reconciler) deleteManagedVolumes(ctx context.Context, fs *featuresv1alpha1.FeatureStore) error {
	for _, server := range managedServerNames(fs) {
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: fs.Namespace, Name: server}}
		if err := r.Client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting StatefulSet %s: %w", server, err)
		}
		claims, err := r.dataVolumes(ctx, fs, server)
		if err != nil {
			return err
		}
		for i := range claims {
			if !claims[i].DeletionTimestamp.IsZero() {
				continue
			}
			if err := r.Client.Delete(ctx, &claims[i]); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting PersistentVolumeClaim %s: %w", claims[i].Name, err)
			}
		}
	}
	return nil
}

// retainManagedVolumes keeps the managed servers' data under the Retain
// policy: it takes the owner references off the data claims (the
// StatefulSet controller sets one to the StatefulSet while its retention
// policy is Delete) and off the server's Secret, which holds the password
// of the data, so the garbage collector removes neither with the
// FeatureStore. A FeatureStore of the same name created later finds both
// again: it adopts the Secret (keptFor), and the StatefulSet controller
// gives its server the claims, which it finds by name. It returns what it
// kept, for the event.
func (r *Reconciler) retainManagedVolumes(ctx context.Context, fs *featuresv1alpha1.FeatureStore) ([]string, error) {
	var kept []string
	for _, server := range managedServerNames(fs) {
		claims, err := r.dataVolumes(ctx, fs, server)
		if err != nil {
			return nil, err
		}
		for i := range claims {
			if err := r.disown(ctx, &claims[i], fs, server); err != nil {
				return nil, err
			}
			kept = append(kept, fmt.Sprintf("PersistentVolumeClaim %s", claims[i].Name))
		}
		secret := &corev1.Secret{}
		err = r.Client.Get(ctx, client.ObjectKey{Namespace: fs.Namespace, Name: server}, secret)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, err
		}
		if err := r.disown(ctx, secret, fs, server); err != nil {
			return nil, err
		}
		kept = append(kept, fmt.Sprintf("Secret %s (the password of that data)", server))
	}
	return kept, nil
}

// disown removes the owner references that would let the garbage
// collector delete obj with the FeatureStore: to the FeatureStore itself
// and to the server's StatefulSet. The patch carries the resourceVersion,
// so a concurrent change fails and is retried.
func (r *Reconciler) disown(ctx context.Context, obj client.Object, fs *featuresv1alpha1.FeatureStore, server string) error {
	refs := obj.GetOwnerReferences()
	kept := slices.DeleteFunc(slices.Clone(refs), func(ref metav1.OwnerReference) bool {
		return ref.UID == fs.UID || (ref.Kind == "StatefulSet" && ref.Name == server)
	})
	if len(kept) == len(refs) {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	obj.SetOwnerReferences(kept)
	if err := r.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("keeping %s from the garbage collector: %w", obj.GetName(), err)
	}
	return nil
}
