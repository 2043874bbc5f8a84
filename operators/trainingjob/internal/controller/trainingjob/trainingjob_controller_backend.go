package trainingjob

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/apply"
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
// the job Stalled with the reason, as does a namespace where the operator
// may create nothing; a finished job needs no backend.
func (r *Reconciler) resolveBackend(_ context.Context, s *scope) (ctrl.Result, error) {
	s.backend = r.Backends.Of(s.tj)
	be, ok := r.Backends.Get(s.backend)
	if s.finished {
		s.be = be
		return ctrl.Result{}, nil
	}
	if err := apply.NamespaceReserved("TrainingJob", s.tj.Namespace); err != nil {
		s.invalid, s.reason = err, commonv1alpha1.ReasonNamespaceReserved
		return ctrl.Result{}, nil //nolint:nilerr // reported as Stalled, a retry cannot help
	}
	if !ok {
		s.invalid, s.reason = fmt.Errorf("backend %s is not one this operator runs (%v)", s.backend, r.Backends.Names()), ReasonBackendUnavailable
		return ctrl.Result{}, nil
	}
	// Both are conditions for a person to act on, not errors to retry.
	s.reason, s.invalid = unusable(be, s.tj)
	s.kindAway = s.reason == ReasonBackendUnavailable
	if s.invalid == nil {
		s.be = be
	}
	return ctrl.Result{}, nil
}

// unusable says why be cannot run tj, with the condition reason.
func unusable(be backend.Backend, tj *trainingv1alpha1.TrainingJob) (string, error) {
	if a, ok := be.(backend.Availability); ok {
		if err := a.Available(tj); err != nil {
			return ReasonBackendUnavailable, err
		}
	}
	if err := be.Validate(tj); err != nil {
		return commonv1alpha1.ReasonInvalidSpec, err
	}
	return "", nil
}

// isAvailability is true when be depends on kinds a cluster may lack.
func isAvailability(be backend.Backend) bool {
	_, ok := be.(backend.Availability)
	return ok
}

// ReasonCompanionNameTaken is the event of a run whose companion (a
// headless Service of an MPIJob's worker, which gives it its host name)
// has a name somebody else's object holds: the run's status stays
// its child's, so the event is what shows that the ranks cannot find each
// other by name, or could find somebody else's pods under their names.
const ReasonCompanionNameTaken = "CompanionNameTaken"

// ensureCompanions creates the objects a backend needs beside the run's
// child, such as the headless Services of an MPIJob's workers, owned by the child
// so that they go with it. Existing ones are left alone when they are the
// run's (they carry nothing that changes during a run); an object of that
// name that is not is never used or touched, and is reported.
func (r *Reconciler) ensureCompanions(ctx context.Context, s *scope) error {
	c, ok := s.be.(backend.Companions)
	if !ok || s.job == nil {
		return nil
	}
	owner := apply.Owner{
		Owns: func(o client.Object) bool {
			return slices.ContainsFunc(o.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == s.job.GetUID() })
		},
		Name:   fmt.Sprintf("run %d of this TrainingJob", s.run),
		Remedy: "give the TrainingJob another name",
	}
	for _, obj := range c.Companions(s.tj, s.run) {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		existing := obj.DeepCopyObject().(client.Object)
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		switch {
		case err == nil:
			s.companionTaken = cmp.Or(s.companionTaken, apply.Check(existing, kind, owner))
			continue
		case !apierrors.IsNotFound(err):
			return err
		}
		if err := controllerutil.SetOwnerReference(s.job, obj, r.Client.Scheme()); err != nil {
			return err
		}
		// The cache holds only the operator's own objects: a foreign one
		// shows as AlreadyExists, and is asked about past the cache.
		err = r.applier().Create(ctx, obj, owner)
		switch {
		case apply.IsForeign(err):
			s.companionTaken = cmp.Or(s.companionTaken, err)
		case err != nil && !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("creating %s %s of run %d: %w", kind, obj.GetName(), s.run, err)
		}
	}
	return nil
}

// applier writes the operator's children as its field manager.
func (r *Reconciler) applier() *apply.Applier {
	return &apply.Applier{Client: r.Client, APIReader: r.APIReader, FieldOwner: r.Settings.OperatorName}
}

// companionIssues warns about a run whose companion's name is taken.
func companionIssues(s *scope) []issue {
	if s.companionTaken == nil {
		return nil
	}
	return []issue{runIssue(s, ReasonCompanionNameTaken,
		"The ranks cannot rely on their host names: "+s.companionTaken.Error())}
}

// runIssue is a warning about the current run, told once for each thing it
// says: a name taken by another object later is told again.
func runIssue(s *scope, reason, message string) issue {
	return issue{key: fmt.Sprintf("run %d/%s/%s", s.run, reason, message), event: ev(corev1.EventTypeWarning, reason, message)}
}

// rejected is true when the API server refused the child of the job's
// current generation: the Stalled condition recorded it, for this
// generation.
func rejected(tj *trainingv1alpha1.TrainingJob) bool {
	c := conditions.Get(tj, commonv1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == commonv1alpha1.ReasonChildRejected && c.ObservedGeneration == tj.GetGeneration()
}
