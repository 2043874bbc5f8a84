package featurestore

import (
	"context"
	"fmt"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/shared/patch"
)

// recordField selects one store's entry in a ProvisioningRecord.
type recordField func(*featuresv1alpha1.ProvisioningRecord) *string

func onlineRecord(r *featuresv1alpha1.ProvisioningRecord) *string   { return &r.OnlineStoreBackend }
func offlineRecord(r *featuresv1alpha1.ProvisioningRecord) *string  { return &r.OfflineStoreBackend }
func registryRecord(r *featuresv1alpha1.ProvisioningRecord) *string { return &r.RegistryBackend }

// recordIntent writes, through the status subresource and before the first
// request that may create anything on backend, that the store selected by
// field may exist there. The record must come first: a create that
// succeeded on the server followed by a lost status write (a crash, a
// conflict, an API server that went away) would otherwise leave a
// FeatureStore whose cleanup does not know the store. A record whose
// create never happened costs only a cleanup that finds nothing.
//
// The patch is guarded by the resourceVersion and merged again on a
// conflict (shared/patch); it carries the whole record, so a record
// inferred for a FeatureStore of an older operator is written in full.
// On success fs holds the object as written, which the reconcile's own
// status write later merges with.
func (r *Reconciler) recordIntent(ctx context.Context, fs *featuresv1alpha1.FeatureStore, field recordField, backend string) error {
	if fs.Status.Provisioning != nil && *field(fs.Status.Provisioning) == backend {
		return nil
	}
	h, err := patch.NewHelper(fs, r.Client, r.APIReader)
	if err != nil {
		return err
	}
	rec := cleanup.RecordOf(fs)
	*field(&rec) = backend
	fs.Status.Provisioning = &rec
	if _, err := h.Patch(ctx, fs); err != nil {
		return fmt.Errorf("recording that the store may be created on backend %s, before creating it: %w", backend, err)
	}
	return nil
}

// ensureRecord gives a FeatureStore without a record the one inferred from
// its status, written with the reconcile's status write. It runs before
// the new conditions replace those the inference reads.
func ensureRecord(fs *featuresv1alpha1.FeatureStore) {
	if fs.Status.Provisioning == nil {
		rec := cleanup.Inferred(fs)
		fs.Status.Provisioning = &rec
	}
}
