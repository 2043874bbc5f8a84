package trainingjob

import (
	"context"
	"fmt"
	"maps"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/apply"
)

// ReasonNetworkPolicyNameTaken is the event of a running job whose
// NetworkPolicy's name was taken by somebody else's policy after its ranks
// started; before they start, the job stalls with NameTaken instead.
const ReasonNetworkPolicyNameTaken = "NetworkPolicyNameTaken"

// ensureNetworkPolicy keeps the NetworkPolicy that admits to the job's
// ranks only the job's own ranks (backend.NetworkPolicy), written with
// server-side apply and owned by the TrainingJob, before the run's child
// is created and for as long as the job has not finished: a policy a user
// deleted, changed or widened (policyExact) is applied again by the next
// reconcile, which the watch on the policies brings. A policy of that name that is not the
// job's is never touched: a job without a child stalls with NameTaken and
// its ranks are not started unguarded; a running job gets a warning event.
// With the policies off (--rank-network-policy=false) the job's own policy,
// if an operator with them on left one, is deleted: a policy nobody
// converges any more must not keep deciding who reaches the ranks.
func (r *Reconciler) ensureNetworkPolicy(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !r.NetworkPolicy {
		return ctrl.Result{}, r.deleteNetworkPolicy(ctx, s)
	}
	if s.finished || s.be == nil {
		return ctrl.Result{}, nil
	}
	desired := backend.NetworkPolicy(r.Settings.OperatorName, s.tj)
	if err := controllerutil.SetControllerReference(s.tj, desired, r.Client.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	applier := r.applier()
	applier.Exact = policyExact
	_, err := applier.Apply(ctx, desired, apply.ControlledBy(s.tj, "TrainingJob"))
	switch {
	case err == nil:
		return ctrl.Result{}, nil
	case apply.IsForeign(err):
		s.mayCreate = false
		if s.job == nil {
			s.invalid, s.reason = err, commonv1alpha1.ReasonNameTaken
		} else {
			s.policyTaken = err
		}
		return ctrl.Result{}, nil
	default:
		// The ranks wait for their policy: a job never starts unguarded.
		s.mayCreate = false
		return ctrl.Result{}, fmt.Errorf("applying NetworkPolicy %s: %w", desired.Name, err)
	}
}

// policyExact are the parts of a rank NetworkPolicy where anything more
// than the operator's admits more: a rule appended (an empty one admits
// everyone), a peer widened (a namespaceSelector added), another policy
// type. Both are atomic lists, which the operator's apply replaces whole.
// Keys another field manager adds to the policy's own pod selector are
// beyond an apply's reach and are not looked at; a namespace's users may
// admit traffic to their pods with policies of their own in any case.
var policyExact = []string{"spec.ingress", "spec.policyTypes"}

// deleteNetworkPolicy deletes the job's NetworkPolicy when the job
// controls it; NotFound and somebody else's policy are left as they are.
func (r *Reconciler) deleteNetworkPolicy(ctx context.Context, s *scope) error {
	live := &networkingv1.NetworkPolicy{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: backend.NetworkPolicyName(s.tj.Name)}, live)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(live, s.tj)) {
		return nil
	}
	if err != nil {
		return err
	}
	err = r.Client.Delete(ctx, live, client.Preconditions{UID: &live.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NetworkPolicy %s (rank NetworkPolicies are off): %w", live.Name, err)
	}
	return nil
}

// networkPolicyIssues warns about a running job whose policy's name is
// taken: its status stays the run's, so the event is what shows it, once
// a run (each reconcile finds the name taken again).
func networkPolicyIssues(s *scope) []issue {
	if s.policyTaken == nil {
		return nil
	}
	return []issue{runIssue(s, ReasonNetworkPolicyNameTaken,
		"The ranks run without the platform's NetworkPolicy: "+s.policyTaken.Error())}
}

// policyChanged passes the policy events that can leave a job's ranks less
// guarded than the operator wants: a deletion, and a change of the spec or
// labels by somebody else (the operator's own create wakes nothing).
func policyChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(ctrlevent.CreateEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				!maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return true },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	}
}
