package notebook

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/crdarrival"
	"github.com/ml-platform/ml-platform/shared/kueue"
)

// A Notebook with a queue runs through Kueue's StatefulSet integration:
// Kueue tracks the StatefulSet in a Workload of its own, gates the pod
// until it admits the Workload, and releases the quota when the
// StatefulSet is scaled to zero (a stop or a cull). What Kueue says there
// about the wait is shown on the Notebook. The operator only reads
// Workloads: they are Kueue's.

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

// A queued Notebook's place in its LocalQueue comes from Kueue's
// visibility API, read through shared/kueue's Positions as for
// TrainingJobs: one list per LocalQueue per refresh.
// +kubebuilder:rbac:groups=visibility.kueue.x-k8s.io,resources=localqueues/pendingworkloads,verbs=get

// statefulSetGVK is how Kueue names the kind of the job a Workload tracks
// (its JobOwnerGVKAnnotation).
var statefulSetGVK = appsv1.SchemeGroupVersion.WithKind("StatefulSet").String()

// queueObservation is what the StatefulSet's Workload says.
type queueObservation struct {
	kueue.State
	// exists is true while Kueue still has a Workload for the
	// StatefulSet, admitted or not.
	exists bool
	// position is the Workload's place in its LocalQueue, starting at 1,
	// when Kueue's visibility API gave one; unknown says why it did not.
	position *int32
	unknown  string
}

// observeQueue reads the Workload Kueue keeps for a queued Notebook's
// StatefulSet; without Kueue's CRD there is nothing to read.
func (r *Reconciler) observeQueue(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !r.watchesWorkloads() || s.nb.Spec.QueueName == "" || s.sts == nil {
		return ctrl.Result{}, nil
	}
	wls, err := kueue.WorkloadsOf(ctx, r.Client, s.nb.Namespace, s.sts.UID)
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range wls {
		st := kueue.Observe(&wls[i])
		if !st.Finished {
			s.queue = &queueObservation{State: st, exists: true}
			return r.observePosition(ctx, s, wls[i].GetName()), nil
		}
	}
	return ctrl.Result{}, nil
}

// observePosition looks up the place of a waiting Workload in the
// Notebook's LocalQueue, and asks to look again after a refresh period: no
// watch reports a change of position.
func (r *Reconciler) observePosition(ctx context.Context, s *scope, workload string) ctrl.Result {
	if r.positions == nil || s.queue.Admitted {
		return ctrl.Result{}
	}
	queue := types.NamespacedName{Namespace: s.nb.Namespace, Name: s.nb.Spec.QueueName}
	s.queue.position, s.queue.unknown = r.positions.Lookup(ctx, queue, workload)
	return ctrl.Result{RequeueAfter: kueue.PositionRefresh(r.QueuePositionRefresh)}
}

// heldByKueue is true when a stopped queued Notebook is to start again
// while Kueue still releases its previous run: its pod is still going, or
// its Workload is still there. Kueue's StatefulSet webhook refuses the
// scale-up until both are gone, so the operator waits for them (the
// StatefulSet and Workload watches bring it back) instead of being
// refused.
func heldByKueue(s *scope) bool {
	if s.nb.Spec.QueueName == "" || s.sts == nil || s.replicas == 0 || ptrValue(s.sts.Spec.Replicas) != 0 {
		return false
	}
	return s.sts.Status.Replicas > 0 || (s.queue != nil && s.queue.exists)
}

// waitingInQueue is the Notebook's queued state, nil unless Kueue holds
// the pod of a Notebook that is to run.
func waitingInQueue(s *scope) *queueObservation {
	if s.queue == nil || s.replicas == 0 || s.queue.Admitted {
		return nil
	}
	return s.queue
}

// markQueue sets the Queued condition and status.queue from the Workload
// of a Notebook that is to run; only a Notebook waiting in its queue has a
// place in it.
func markQueue(s *scope) {
	nb := s.nb
	nb.Status.Queue = nil
	switch q := waitingInQueue(s); {
	case q != nil:
		nb.Status.Queue = &commonv1alpha1.QueueStatus{LocalQueue: nb.Spec.QueueName, Position: q.position}
		conditions.MarkTrue(nb, notebooksv1alpha1.ConditionQueued, queuedReason(q), queuedMessage(nb, q))
	case s.queue != nil && s.replicas > 0:
		conditions.MarkFalse(nb, notebooksv1alpha1.ConditionQueued, notebooksv1alpha1.ReasonAdmitted,
			fmt.Sprintf("Kueue admitted the Jupyter server from queue %s", nb.Spec.QueueName))
	default:
		conditions.Remove(nb, notebooksv1alpha1.ConditionQueued)
	}
}

// queuedReason is Kueue's own reason for the wait (Pending, Preempted
// ...), or Queued while Kueue has not said yet.
func queuedReason(q *queueObservation) string {
	if q.Reason != "" {
		return q.Reason
	}
	return notebooksv1alpha1.ReasonQueued
}

func queuedMessage(nb *notebooksv1alpha1.Notebook, q *queueObservation) string {
	msg := fmt.Sprintf("The Jupyter server waits for Kueue to admit it from queue %s", nb.Spec.QueueName)
	switch {
	case q.position != nil:
		msg += fmt.Sprintf("; position %d in LocalQueue %s", *q.position, nb.Spec.QueueName)
	case q.unknown != "":
		msg += "; " + q.unknown
	}
	if q.Message != "" {
		msg += ". Kueue: " + q.Message
	}
	return msg
}

// workloadToNotebook maps a Workload to the Notebook of the StatefulSet it
// tracks: the StatefulSet has the Notebook's name. A Workload of another
// StatefulSet maps to a Notebook that does not exist, which costs one
// cache read.
func workloadToNotebook(_ context.Context, o client.Object) []reconcile.Request {
	a := o.GetAnnotations()
	if a[kueue.JobOwnerGVKAnnotation] != statefulSetGVK || a[kueue.JobOwnerNameAnnotation] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: a[kueue.JobOwnerNameAnnotation]}}}
}

// Kueue may be installed after the operator started (for a team that had
// none, or the umbrella's kueue.enabled turned on in a running platform).
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// kueueArrival, for an operator that started without Kueue's Workload CRD,
// starts watching Workloads when it appears (shared/crdarrival): queued
// Notebooks then show Kueue's wait, as in an operator started after Kueue.
func (r *Reconciler) kueueArrival() *crdarrival.Arrival {
	return &crdarrival.Arrival{
		Name:  "kueue",
		Kinds: []client.Object{kueue.NewWorkload()},
		Watch: func(mgr ctrl.Manager, obj client.Object) source.Source {
			return source.Kind(mgr.GetCache(), obj, handler.EnqueueRequestsFromMapFunc(workloadToNotebook))
		},
		Arrived: func(ctx context.Context) {
			r.workloadsArrived.Store(true)
			ctrl.LoggerFrom(ctx).Info("Kueue's Workload CRD appeared: queued Notebooks show Kueue's wait now")
		},
		Waiting: func(ctx context.Context) ([]client.Object, error) {
			list := &notebooksv1alpha1.NotebookList{}
			if err := r.Client.List(ctx, list); err != nil {
				return nil, err
			}
			var out []client.Object
			for i := range list.Items {
				if list.Items[i].Spec.QueueName != "" {
					out = append(out, &list.Items[i])
				}
			}
			return out, nil
		},
	}
}

// watchesWorkloads is true when Kueue's Workloads are watched: their CRD
// was installed at start, or appeared since.
func (r *Reconciler) watchesWorkloads() bool {
	return r.WatchesWorkloads || r.workloadsArrived.Load()
}
