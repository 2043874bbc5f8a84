package trainingjob

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/kueue"
)

// Kueue tracks each queued job in a Workload of its own; what Kueue says
// there about the job's wait (no quota, no such LocalQueue, preempted) is
// what a user waiting in the queue needs to see, so it is shown on the
// TrainingJob. The operator only reads Workloads: they are Kueue's.

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

// queueObservation is what Kueue's Workload says about the current run's
// child while it waits.
type queueObservation struct {
	// message is Kueue's explanation of the wait: the message of the
	// Workload's QuotaReserved=False condition, or of Evicted=True.
	message string
	// position is the Workload's place in its LocalQueue, starting at 1,
	// when Kueue's visibility API gave one; unknown says why it did not.
	position *int32
	unknown  string
}

// admission is Kueue's admission of the current run's child, observed by
// the reconcile that records it.
type admission struct {
	// waited is from when the run entered the queue (its child's creation,
	// or the eviction that sent it back) to the Workload's Admitted time.
	waited time.Duration
}

func newWorkload() *unstructured.Unstructured { return kueue.NewWorkload() }

// observeWorkload reads the Workload of the current run's child while Kueue
// holds it suspended (why it waits, and its place in the queue), and once
// more when Kueue admitted it and status does not say so yet (when the
// admission happened, for the queue-wait metric). Without Kueue's CRD there
// is nothing to read.
func (r *Reconciler) observeWorkload(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !r.watchesWorkloads() || s.job == nil || s.tj.Spec.QueueName == "" || s.finished || s.end != nil {
		return ctrl.Result{}, nil
	}
	queued := s.state.SpecSuspended
	if !queued && admissionRecorded(s.tj) {
		return ctrl.Result{}, nil
	}
	items, err := kueue.WorkloadsOf(ctx, r.Client, s.tj.Namespace, s.job.GetUID())
	if err != nil || len(items) == 0 {
		return ctrl.Result{}, err
	}
	wl := &items[0]
	if !queued {
		if at := conditionTime(wl, "Admitted"); at != nil {
			s.admission = &admission{waited: at.Sub(queueEntry(s.tj, s.job))}
		}
		return ctrl.Result{}, nil
	}
	s.queue = &queueObservation{message: waitMessage(wl)}
	if s.tj.Spec.Suspend || conditionStatus(wl, "QuotaReserved") == "True" {
		// Not waiting for quota: suspended by the user, or being admitted.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: r.observePosition(ctx, s, wl.GetName())}, nil
}

// admissionRecorded is true when status already records Kueue's admission
// of the current run.
func admissionRecorded(tj *trainingv1alpha1.TrainingJob) bool {
	c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
	return c != nil && c.Reason == ReasonAdmitted
}

// queueEntry is when the current run entered the queue: when Kueue evicted
// it back into the queue, as recorded, else when its child was created
// (suspended, in the queue).
func queueEntry(tj *trainingv1alpha1.TrainingJob, job client.Object) time.Time {
	if c := conditions.Get(tj, trainingv1alpha1.ConditionQueued); c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonEvicted {
		return c.LastTransitionTime.Time
	}
	return job.GetCreationTimestamp().Time
}

// conditionTime is when a Workload's condition last became True; nil
// while it is not True.
func conditionTime(wl *unstructured.Unstructured, typ string) *time.Time {
	c := workloadCondition(wl, typ)
	if c["status"] != "True" {
		return nil
	}
	s, _ := c["lastTransitionTime"].(string)
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil
	}
	return &t
}

func conditionStatus(wl *unstructured.Unstructured, typ string) any {
	return workloadCondition(wl, typ)["status"]
}

// workloadCondition is a condition of a Workload by type, nil when absent.
func workloadCondition(wl *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
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
