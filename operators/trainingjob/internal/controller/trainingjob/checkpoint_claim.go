package trainingjob

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/apireject"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// annotationCreatedFor on a checkpoint claim the operator created holds the
// UID of the TrainingJob it was created for. The claim itself thereby
// records its creation durably: the CheckpointClaimCreated event follows
// the status write that first records the claim ready, whichever reconcile
// that is, so a write that fails after the claim was created (a conflict,
// an outage) no longer loses the event. A claim retained from an earlier
// TrainingJob of the same name carries that job's UID and is not announced
// as created.
const annotationCreatedFor = "training.mlplatform.dev/created-for"

// claimCreationRecorded says whether this reconcile's status, which the
// Runner wrote before it asks for events, recorded for the first time the
// claim created for this TrainingJob (status.checkpointClaim is recorded
// with the run's child).
func claimCreationRecorded(s *scope, before, after *trainingv1alpha1.TrainingJob) bool {
	return s.createdClaim && s.claim != nil && before.Status.CheckpointClaim == "" && after.Status.CheckpointClaim != ""
}

// checkpointClaim is the phase that makes sure the checkpoint claim exists
// and suits the job before a run is created (observeJob decided that one
// may be). A claim that is not ready yet is looked at again after
// claimPollInterval, unless only a person can fix it.
func (r *Reconciler) checkpointClaim(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.tj.Spec.Checkpoint == nil {
		return ctrl.Result{}, nil
	}
	if !s.mayCreate {
		return ctrl.Result{}, r.observeUnrecordedClaim(ctx, s)
	}
	if err := r.ensureClaim(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if s.claim.ready || s.claim.stalled {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: claimPollInterval}, nil
}

// observeUnrecordedClaim reads, without creating it, the operator's claim
// of a run whose child exists while status does not record the claim yet:
// the reconcile that created them failed its status write. The status
// then records the claim and its readiness, and the creation event is due.
func (r *Reconciler) observeUnrecordedClaim(ctx context.Context, s *scope) error {
	cp := s.tj.Spec.Checkpoint
	if s.job == nil || s.finished || cp.Size == nil || s.tj.Status.CheckpointClaim != "" {
		return nil
	}
	name := backend.CheckpointClaimName(s.tj)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: name}, pvc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if pvc.Labels[trainingv1alpha1.LabelJobName] != s.tj.Name {
		return nil
	}
	s.claim = &claimObservation{name: name}
	s.createdClaim = pvc.Annotations[annotationCreatedFor] == string(s.tj.UID)
	return checkClaim(s.claim, pvc, cp, createdClaimMessage(cp, name))
}

// createdClaimMessage says where the checkpoints of a claim the operator
// created are kept, and what happens to them.
func createdClaimMessage(cp *trainingv1alpha1.Checkpoint, name string) string {
	policy := "it is kept after the TrainingJob is deleted (deletionPolicy Retain)"
	if cp.DeletionPolicy == commonv1alpha1.DeletionPolicyDelete {
		policy = "it is deleted with the TrainingJob (deletionPolicy Delete)"
	}
	return fmt.Sprintf("Checkpoints are kept in claim %s; %s", name, policy)
}

// ensureClaim observes the checkpoint claim into s.claim, creating it when
// the operator owns it. An existing claim is read live: the user's claims
// are outside the operator's label-restricted cache. The claim the operator
// creates carries its labels; with deletionPolicy Delete the TrainingJob
// controls it, so the garbage collector deletes it with the TrainingJob,
// and with Retain it has no owner at all, so neither deletion nor TTL
// expiry of the TrainingJob touches it.
func (r *Reconciler) ensureClaim(ctx context.Context, s *scope) error {
	cp := s.tj.Spec.Checkpoint
	name := backend.CheckpointClaimName(s.tj)
	obs := &claimObservation{name: name}
	s.claim = obs
	if cp.ClaimName != "" {
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: name}, pvc)
		if apierrors.IsNotFound(err) {
			obs.reason, obs.message = commonv1alpha1.ReasonDependencyNotFound, fmt.Sprintf("PersistentVolumeClaim %s does not exist", name)
			return nil
		}
		if err != nil {
			return err
		}
		return checkClaim(obs, pvc, cp, fmt.Sprintf("Checkpoints are kept in the existing claim %s, which the operator never deletes", name))
	}
	pvc, err := r.getOrCreateClaim(ctx, s, name)
	if err != nil || pvc == nil {
		return err
	}
	if err := apply.Check(pvc, "PersistentVolumeClaim", claimOwner(s.tj)); err != nil {
		obs.stalled, obs.reason, obs.message = true, commonv1alpha1.ReasonNameTaken, err.Error()
		return nil //nolint:nilerr // a name taken is recorded in status (Stalled), for a person to fix; retrying cannot
	}
	s.createdClaim = pvc.Annotations[annotationCreatedFor] == string(s.tj.UID)
	if err := r.adoptClaim(ctx, s.tj, pvc); err != nil {
		return err
	}
	return checkClaim(obs, pvc, cp, createdClaimMessage(cp, name))
}

// getOrCreateClaim returns the operator's claim, creating it when it is
// missing; nil without an error when it cannot be created now (the reason
// is in s.claim).
func (r *Reconciler) getOrCreateClaim(ctx context.Context, s *scope, name string) (*corev1.PersistentVolumeClaim, error) {
	key := client.ObjectKey{Namespace: s.tj.Namespace, Name: name}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, key, pvc)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, pvc)
	}
	if !apierrors.IsNotFound(err) {
		return pvc, err
	}
	desired := r.desiredClaim(s.tj, name)
	if s.tj.Spec.Checkpoint.DeletionPolicy == commonv1alpha1.DeletionPolicyDelete {
		if err := controllerutil.SetControllerReference(s.tj, desired, r.Client.Scheme()); err != nil {
			return nil, err
		}
	}
	err = r.Client.Create(ctx, desired)
	switch {
	case err == nil:
		return desired, nil
	case apierrors.IsAlreadyExists(err):
		return pvc, r.APIReader.Get(ctx, key, pvc)
	case finalizer.IsNamespaceTerminatingError(err):
		s.claim.reason, s.claim.message = ReasonJobNotCreated, "The namespace is terminating"
		return nil, nil
	case apireject.Is(err):
		// Trying again cannot help: the job is Stalled, as for a refused
		// child, until its spec changes (rejected).
		s.claim.stalled, s.claim.reason = true, commonv1alpha1.ReasonChildRejected
		s.claim.message = fmt.Sprintf("the API server rejected PersistentVolumeClaim %s: %s", name, apireject.Message(err))
		return nil, nil
	default:
		return nil, fmt.Errorf("creating checkpoint claim %s: %w", name, err)
	}
}

// adoptClaim makes a claim retained from an earlier TrainingJob of the same
// name, used again under deletionPolicy Delete, belong to this one.
func (r *Reconciler) adoptClaim(ctx context.Context, tj *trainingv1alpha1.TrainingJob, pvc *corev1.PersistentVolumeClaim) error {
	if tj.Spec.Checkpoint.DeletionPolicy != commonv1alpha1.DeletionPolicyDelete || metav1.GetControllerOf(pvc) != nil {
		return nil
	}
	base := pvc.DeepCopy()
	if err := controllerutil.SetControllerReference(tj, pvc, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("adopting checkpoint claim %s: %w", pvc.Name, err)
	}
	return nil
}

// checkClaim accepts a claim that offers the access mode the job mounts it
// with: ReadWriteMany for every pod, or one of the single-node modes (or
// ReadWriteMany) for the rank-0 pod alone.
func checkClaim(obs *claimObservation, pvc *corev1.PersistentVolumeClaim, cp *trainingv1alpha1.Checkpoint, ready string) error {
	accepted := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	if cp.AccessMode != corev1.ReadWriteMany {
		accepted = append(accepted, corev1.ReadWriteOnce, corev1.ReadWriteOncePod)
	}
	for _, m := range pvc.Spec.AccessModes {
		if slices.Contains(accepted, m) {
			obs.ready, obs.reason, obs.message = true, ReasonClaimReady, ready
			return nil
		}
	}
	obs.stalled, obs.reason = true, ReasonAccessModeMissing
	obs.message = fmt.Sprintf("PersistentVolumeClaim %s offers access modes %v, not %s (checkpoint.accessMode)", pvc.Name, pvc.Spec.AccessModes, cp.AccessMode)
	return nil
}

// desiredClaim is the checkpoint claim the operator creates.
func (r *Reconciler) desiredClaim(tj *trainingv1alpha1.TrainingJob, name string) *corev1.PersistentVolumeClaim {
	cp := tj.Spec.Checkpoint
	labels := manager.ManagedByLabels(r.Settings.OperatorName)
	labels[trainingv1alpha1.LabelJobName] = tj.Name
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: name, Labels: labels, Annotations: map[string]string{annotationCreatedFor: string(tj.UID)}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{cp.AccessMode},
			StorageClassName: cp.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *cp.Size}},
		},
	}
}

// claimOwner owns the checkpoint claims created for tj: a retained claim
// has no owner reference, so the job's name label, which the operator set
// when it created the claim, is what ties it to tj (or to a TrainingJob of
// the same name created later, which uses it again).
func claimOwner(tj *trainingv1alpha1.TrainingJob) apply.Owner {
	return apply.Owner{
		Owns:   func(o client.Object) bool { return o.GetLabels()[trainingv1alpha1.LabelJobName] == tj.Name },
		Name:   "TrainingJob " + tj.Name,
		Remedy: "name an existing claim in checkpoint.claimName",
	}
}
