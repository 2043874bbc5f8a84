package featurestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// PendingCleanupName is the ConfigMap recording a FeatureStore's handed-off
// cleanup; the UID keeps it unique across namespaces and re-creations.
func PendingCleanupName(uid string) string { return "featurestore-cleanup-" + uid }

// cleanup removes what the FeatureStore provisioned, unless its deletion
// policy retains it: the stores in shared servers, and the data volumes of
// managed servers. Everything else of a managed server is an owned child
// that the garbage collector removes.
func (r *Reconciler) cleanup(ctx context.Context, obj finalizer.Object) error {
	fs := obj.(*featuresv1alpha1.FeatureStore)
	plan := cleanup.ProvisionedPlan(fs)
	if !cleanup.Deletes(fs.Spec.DeletionPolicy) {
		if err := r.retainClaim(ctx, fs, plan); err != nil {
			return err
		}
		volumes, err := r.retainManagedVolumes(ctx, fs)
		if err != nil {
			return err
		}
		if kept := append(cleanup.Retained(plan), volumes...); len(kept) > 0 {
			msg := "deletionPolicy Retain keeps " + strings.Join(kept, "; ")
			if plan.Redis != "" {
				msg += fmt.Sprintf("; no other FeatureStore may use the project's keys until an administrator deletes ConfigMap %s/%s",
					r.Namespace, RetainedClaimName(string(fs.UID)))
			}
			r.Recorder.Event(fs, corev1.EventTypeNormal, "Retained", msg)
		}
		return nil
	}
	if err := r.deleteManagedVolumes(ctx, fs); err != nil {
		return err
	}
	if plan.Empty() {
		return nil
	}
	ownsKeys, err := claims.OwnsRedisKeys(ctx, r.Client, r.APIReader, r.Namespace, plan, false)
	if err != nil {
		return err
	}
	out, err := cleanup.Run(ctx, r.Backends, plan, ownsKeys)
	if len(out.Untouched) > 0 {
		r.Recorder.Event(fs, corev1.EventTypeWarning, "CleanupConflict", "Left untouched: "+strings.Join(out.Untouched, "; "))
	}
	if err != nil {
		r.CleanupFailures.Count("featurestore")
	}
	return err
}

// finalize runs the deletion path. When an administrator abandoned the
// cleanup, the shared finalizer releases the FeatureStore without running
// it; this adds the event that says what was left on the servers for
// somebody to remove by hand.
func (r *Reconciler) finalize(ctx context.Context, fs *featuresv1alpha1.FeatureStore) (ctrl.Result, error) {
	abandoning := fs.Annotations[r.Finalizer.AbandonAnnotation()] == "true" && controllerutil.ContainsFinalizer(fs, FinalizerName)
	res, err := r.Finalizer.Finalize(ctx, fs)
	if err != nil || !abandoning || controllerutil.ContainsFinalizer(fs, FinalizerName) {
		return res, err
	}
	var left []string
	// Retain keeps everything anyway: abandoning gave up nothing there.
	if cleanup.Deletes(fs.Spec.DeletionPolicy) {
		left = cleanup.Remaining(ctx, r.Backends, cleanup.ProvisionedPlan(fs))
	}
	if len(left) == 0 {
		r.Recorder.Event(fs, corev1.EventTypeNormal, EventLeftBehind, "Cleanup abandoned; nothing it would have removed remains in shared servers")
		return res, nil
	}
	r.Recorder.Event(fs, corev1.EventTypeWarning, EventLeftBehind,
		"Cleanup abandoned; left behind for removal by hand: "+strings.Join(left, "; "))
	return res, nil
}

// EventLeftBehind names what an abandoned cleanup left on the servers.
const EventLeftBehind = "ResourcesLeftBehind"

// handoff records the cleanup plan in the operator's namespace when the
// FeatureStore's namespace is being deleted while its servers are
// unreachable; the pending-cleanup controller finishes it later. Under
// the Retain policy nothing is to be removed, but the claim on the kept
// keys must outlive the FeatureStore all the same.
func (r *Reconciler) handoff(ctx context.Context, obj finalizer.Object, _ error) error {
	fs := obj.(*featuresv1alpha1.FeatureStore)
	plan := cleanup.ProvisionedPlan(fs)
	if !cleanup.Deletes(fs.Spec.DeletionPolicy) {
		return r.retainClaim(ctx, fs, plan)
	}
	if plan.Empty() {
		return nil
	}
	return r.record(ctx, fs, plan, PendingCleanupName(string(fs.UID)), claims.LabelPendingCleanup, "the pending cleanup")
}

// RetainedClaimName is the ConfigMap that keeps the Redis key space of a
// FeatureStore deleted with deletionPolicy Retain claimed.
func RetainedClaimName(uid string) string { return "featurestore-retained-" + uid }

// retainClaim records, before a FeatureStore deleted with deletionPolicy
// Retain goes, that its online store's keys stay on the Redis server:
// without the record the store's claim on its project's key space would
// go with it, and a later store with the same project would read and
// write the kept keys. The record holds the claim, in the FeatureStore's
// place, until an administrator deletes it.
func (r *Reconciler) retainClaim(ctx context.Context, fs *featuresv1alpha1.FeatureStore, plan cleanup.Plan) error {
	if plan.Redis == "" {
		return nil
	}
	claimOnly := plan
	claimOnly.Postgres = nil
	return r.record(ctx, fs, claimOnly, RetainedClaimName(string(fs.UID)), claims.LabelRetainedClaim, "the retained claim on the Redis keys")
}

// record creates a ConfigMap holding plan in the operator's namespace,
// labelled with label; one that exists already is the same record.
func (r *Reconciler) record(ctx context.Context, fs *featuresv1alpha1.FeatureStore, plan cleanup.Plan, name, label, what string) error {
	raw, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	labels := manager.ManagedByLabels(OperatorName)
	labels[label] = "true"
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.Namespace, Name: name, Labels: labels,
			Annotations: map[string]string{"features.mlplatform.dev/featurestore": fs.Namespace + "/" + fs.Name},
		},
		Data: map[string]string{claims.PlanKey: string(raw)},
	}
	if err := r.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("recording %s in %s: %w", what, r.Namespace, err)
	}
	return nil
}
