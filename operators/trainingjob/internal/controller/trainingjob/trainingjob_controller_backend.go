package trainingjob

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// Condition reasons of backend resolution and child creation.
const (
	// ReasonBackendUnavailable: the job's backend cannot run in this
	// cluster, such as kubeflow without the Kubeflow CRDs.
	ReasonBackendUnavailable = "BackendUnavailable"
)

// staleRequeue is how soon a reconcile that found its cache behind a
// recorded decision looks again.
const staleRequeue = time.Second

// decisionRequeue is how soon the reconcile after a recorded run end
// comes.
const decisionRequeue = 100 * time.Millisecond

// resolveBackend picks the job's backend: the one recorded in status, else
// spec.backend, else the operator's default. A backend that is not
// registered, not available in this cluster, or cannot run this job makes
// the job Stalled with the reason; a finished job needs no backend.
func (r *Reconciler) resolveBackend(_ context.Context, s *scope) (ctrl.Result, error) {
	s.backend = r.Backends.Of(s.tj)
	be, ok := r.Backends.Get(s.backend)
	if s.finished {
		s.be = be
		return ctrl.Result{}, nil
	}
	if !ok {
		s.invalid, s.reason = fmt.Errorf("backend %s is not one this operator runs (%v)", s.backend, r.Backends.Names()), ReasonBackendUnavailable
		return ctrl.Result{}, nil
	}
	// Both are conditions for a person to act on, not errors to retry.
	s.reason, s.invalid = unusable(be, s.tj)
	if s.invalid == nil {
		s.be = be
	}
	return ctrl.Result{}, nil
}

// unusable says why be cannot run tj, with the condition reason.
func unusable(be backend.Backend, tj *trainingv1alpha1.TrainingJob) (string, error) {
	if a, ok := be.(backend.Availability); ok {
		if err := a.Available(); err != nil {
			return ReasonBackendUnavailable, err
		}
	}
	if err := be.Validate(tj); err != nil {
		return commonv1alpha1.ReasonInvalidSpec, err
	}
	return "", nil
}

// ensureCompanions creates the objects a backend needs beside the run's
// child, such as the native backend's headless Service, owned by the child
// so that they go with it. Existing ones are left alone: they carry nothing
// that changes during a run.
func (r *Reconciler) ensureCompanions(ctx context.Context, s *scope) error {
	c, ok := s.be.(backend.Companions)
	if !ok || s.job == nil {
		return nil
	}
	for _, obj := range c.Companions(s.tj, s.run) {
		existing := obj.DeepCopyObject().(client.Object)
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		if err == nil || !apierrors.IsNotFound(err) {
			return err
		}
		if err := controllerutil.SetOwnerReference(s.job, obj, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s of run %d: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), s.run, err)
		}
	}
	return nil
}

// rejected is true when the API server refused the child of the job's
// current generation: the Stalled condition recorded it, for this
// generation.
func rejected(tj *trainingv1alpha1.TrainingJob) bool {
	c := conditions.Get(tj, commonv1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == commonv1alpha1.ReasonChildRejected && c.ObservedGeneration == tj.GetGeneration()
}
