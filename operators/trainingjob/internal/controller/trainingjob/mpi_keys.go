package trainingjob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/mpi"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// ensureMPIKeys keeps the SSH key pair of a framework mpi job in its
// Secret, owned by the TrainingJob (one pair serves every run): generated
// before the first run's job, and generated again whenever the Secret is
// missing while the job is unfinished, so a deleted Secret never leaves a
// run's pods waiting for their key volume. Pods that already started
// copied their keys and keep them. The keys are never logged nor put in
// an event or in status. The job is not created until the Secret exists;
// a Secret of that name that is not the job's stalls it.
func (r *Reconciler) ensureMPIKeys(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.tj.Spec.Framework != trainingv1alpha1.FrameworkMPI || s.finished || s.be == nil {
		return ctrl.Result{}, nil
	}
	owner := apply.ControlledBy(s.tj, "TrainingJob")
	existing := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: mpi.SecretName(s.tj.Name)}, existing)
	switch {
	case err == nil:
		err = apply.Check(existing, "Secret", owner)
	case apierrors.IsNotFound(err):
		err = r.createMPIKeys(ctx, s, owner)
	}
	if apply.IsForeign(err) {
		s.invalid, s.reason, s.mayCreate = err, commonv1alpha1.ReasonNameTaken, false
		return ctrl.Result{}, nil
	}
	if err != nil {
		s.mayCreate = false
	}
	return ctrl.Result{}, err
}

// createMPIKeys generates the key pair and creates its Secret, written
// once and never updated, so it is created rather than applied.
func (r *Reconciler) createMPIKeys(ctx context.Context, s *scope, owner apply.Owner) error {
	data, err := mpi.NewKeyPair()
	if err != nil {
		return err
	}
	labels := manager.ManagedByLabels(r.Settings.OperatorName)
	labels[trainingv1alpha1.LabelJobName] = s.tj.Name
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.tj.Namespace, Name: mpi.SecretName(s.tj.Name), Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	if err := controllerutil.SetControllerReference(s.tj, secret, r.Client.Scheme()); err != nil {
		return err
	}
	err = r.applier().Create(ctx, secret, owner)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		// AlreadyExists is a concurrent reconcile's Secret, ours as well.
		return nil
	case apply.IsForeign(err):
		return err
	default:
		// The API error names the Secret, never its data.
		return fmt.Errorf("creating the MPI SSH Secret %s: %w", secret.Name, err)
	}
}
