package trainingjob

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/kueue"
)

// Kueue tracks each queued job in a Workload of its own; what Kueue says
// there about the job's wait (no quota, no such LocalQueue, preempted) is
// what a user waiting in the queue needs to see, so it is shown on the
// TrainingJob. The operator only reads Workloads: they are Kueue's.

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

// workloadGVK is the Workload in the version Kueue v0.17 stores and serves
// first.
var workloadGVK = kueue.WorkloadGVK

// workloadJobUIDLabel is the label Kueue puts on a Workload with the UID of
// the job it tracks (Kueue's pkg/controller/constants JobUIDLabel).
const workloadJobUIDLabel = kueue.JobUIDLabel

// queueObservation is what Kueue's Workload says about the current run's
// child while it waits.
type queueObservation struct {
	// message is Kueue's explanation of the wait: the message of the
	// Workload's QuotaReserved=False condition, or of Evicted=True.
	message string
}

func newWorkload() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workloadGVK)
	return u
}

// observeWorkload reads the Workload of a queued child that Kueue holds
// suspended; without Kueue's CRD there is nothing to read.
func (r *Reconciler) observeWorkload(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !r.WatchesWorkloads || s.job == nil || s.tj.Spec.QueueName == "" || !s.state.SpecSuspended {
		return ctrl.Result{}, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(workloadGVK.GroupVersion().WithKind(workloadGVK.Kind + "List"))
	if err := r.Client.List(ctx, list, client.InNamespace(s.tj.Namespace), client.MatchingLabels{workloadJobUIDLabel: string(s.job.GetUID())}); err != nil {
		return ctrl.Result{}, err
	}
	if len(list.Items) > 0 {
		s.queue = &queueObservation{message: waitMessage(&list.Items[0])}
	}
	return ctrl.Result{}, nil
}

// waitMessage is why Kueue keeps a Workload waiting: an eviction (its
// reason says which, e.g. Preempted) or the reason quota is not reserved.
func waitMessage(wl *unstructured.Unstructured) string { return kueue.WaitMessage(wl) }

// workloadToTrainingJob maps a Workload to the TrainingJob of the job it
// tracks, through the label every generated pod template carries: Kueue
// copies the pod templates into the Workload's pod sets.
func workloadToTrainingJob(_ context.Context, o client.Object) []reconcile.Request {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	podSets, _, _ := unstructured.NestedSlice(u.Object, "spec", "podSets")
	for _, ps := range podSets {
		m, ok := ps.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "template", "metadata", "labels", trainingv1alpha1.LabelJobName)
		if name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: name}}}
		}
	}
	return nil
}
