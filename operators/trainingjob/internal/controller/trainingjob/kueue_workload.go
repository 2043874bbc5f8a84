package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/kueue"
)

// Kueue tracks each queued job in a Workload of its own; what Kueue says
// there about the job's wait (no quota, no such LocalQueue, preempted) is
// what a user waiting in the queue needs to see, so it is shown on the
// TrainingJob. The operator reads Workloads, they are Kueue's; it deletes
// one only when Kueue would leave it behind (releaseWorkloads).

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;delete;patch

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
	// noWorkload says why the child has no Workload past WorkloadGrace:
	// Kueue does not manage its kind, so nothing will ever admit it.
	noWorkload string
	// deactivated says that Kueue deactivated the Workload (spec.active
	// false): nothing admits it until somebody activates it again.
	deactivated string
	// finished says that Kueue declared the Workload finished while the
	// child never ran (e.g. FailedToStart): nothing will ever admit it.
	finished string
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
	if s.job == nil || !s.queued() || s.finished || s.end != nil {
		return ctrl.Result{}, nil
	}
	queued := s.state.SpecSuspended
	if !r.watchesWorkloads() {
		if queued && !s.tj.Spec.Suspend {
			return r.awaitWorkload(s, false), nil
		}
		return ctrl.Result{}, nil
	}
	if !queued && admissionRecorded(s.tj) {
		return ctrl.Result{}, nil
	}
	items, err := kueue.WorkloadsOf(ctx, r.Client, s.tj.Namespace, s.job.GetUID())
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(items) == 0 {
		if !queued || s.tj.Spec.Suspend {
			return ctrl.Result{}, nil
		}
		return r.awaitWorkload(s, true), nil
	}
	wl := &items[0]
	if !queued {
		if at := conditionTime(wl, "Admitted"); at != nil {
			s.admission = &admission{waited: at.Sub(queueEntry(s.tj, s.job))}
		}
		return ctrl.Result{}, nil
	}
	s.queue = &queueObservation{message: waitMessage(wl)}
	s.queue.readVerdict(wl)
	if s.tj.Spec.Suspend || conditionStatus(wl, "QuotaReserved") == "True" || s.queue.deactivated != "" || s.queue.finished != "" {
		// Not waiting for quota: suspended by the user, being admitted, or
		// given up by Kueue.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: r.observePosition(ctx, s, wl.GetName())}, nil
}

// releaseWorkloads deletes the Workloads of a child taken out of its
// queue. With manageJobsWithoutQueueName false (the configuration the
// operator needs), Kueue ignores a job once its queue label is gone, and
// never finishes or deletes the Workload it made while the job waited:
// that Workload keeps its LocalQueue, and Kueue would later admit it and
// hold the ClusterQueue's quota for a job that runs outside Kueue. Deleting
// it is not enough either: Kueue's finalizer on it is removed only by
// Kueue's controller of the job, which ignores the job now, and Kueue
// admits a Workload that is being deleted. So the operator removes that
// finalizer too, as Kueue does for a Workload deleted by hand.
//
// Only Workloads that name a LocalQueue go: Kueue configured to manage
// jobs without a queue makes queueless ones, which are its own. It runs
// after convergeQueueLabel took the label off, so Kueue does not make a
// new Workload, and before convergeSuspend unsuspends the child: a child
// that runs unsuspended outside a queue has no Workload left, and is not
// looked at.
func (r *Reconciler) releaseWorkloads(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job == nil || s.finished || s.end != nil || !s.state.SpecSuspended || s.queued() || !r.watchesWorkloads() ||
		s.job.GetLabels()[trainingv1alpha1.LabelKueueQueueName] != "" {
		return ctrl.Result{}, nil
	}
	items, err := kueue.WorkloadsOf(ctx, r.Client, s.tj.Namespace, s.job.GetUID())
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range items {
		if q, _, _ := unstructured.NestedString(items[i].Object, "spec", "queueName"); q == "" {
			continue
		}
		if err := r.releaseWorkload(ctx, &items[i]); err != nil {
			s.unreleased = true
			return ctrl.Result{}, fmt.Errorf("deleting Workload %s of %s %s, taken out of its queue: %w", items[i].GetName(), s.be.Reference(s.tj, s.run).Kind, s.jobName, err)
		}
	}
	return ctrl.Result{}, nil
}

// releaseWorkload removes Kueue's finalizer from a Workload, then deletes
// it; each write only while it is still needed. The finalizer goes first:
// the patch is checked against the resourceVersion read, which the delete
// would change.
func (r *Reconciler) releaseWorkload(ctx context.Context, wl *unstructured.Unstructured) error {
	if controllerutil.ContainsFinalizer(wl, kueue.ResourceInUseFinalizer) {
		base := wl.DeepCopy()
		controllerutil.RemoveFinalizer(wl, kueue.ResourceInUseFinalizer)
		if err := r.Client.Patch(ctx, wl, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if !wl.GetDeletionTimestamp().IsZero() {
		return nil
	}
	uid := wl.GetUID()
	return client.IgnoreNotFound(r.Client.Delete(ctx, wl, client.Preconditions{UID: &uid}))
}

// readVerdict reads whether Kueue gave up on a waiting child's Workload:
// it declared it Finished although the child is still suspended, never
// having run as admitted (Kueue's FailedToStart: it could not start the
// job), or deactivated it. Kueue deactivates a Workload by setting its
// spec.active to false, whoever asked for it (an administrator, or Kueue
// itself past waitForPodsReady's requeue limit); its Evicted condition
// says why.
func (q *queueObservation) readVerdict(wl *unstructured.Unstructured) {
	if c := workloadCondition(wl, "Finished"); c["status"] == "True" {
		q.finished = fmt.Sprintf("Kueue finished Workload %s without running the job: %v: %v", wl.GetName(), c["reason"], c["message"])
		return
	}
	if active, found, _ := unstructured.NestedBool(wl.Object, "spec", "active"); !found || active {
		return
	}
	why := "its spec.active is false"
	if c := workloadCondition(wl, "Evicted"); c["status"] == "True" && c["message"] != "" {
		why = fmt.Sprint(c["message"])
	}
	q.deactivated = fmt.Sprintf("Kueue deactivated Workload %s: %s. Nothing admits the job until the Workload's spec.active is true again", wl.GetName(), why)
}

// deletedAfterDeactivation says why the current run's child is gone when
// status says Kueue deactivated its Workload: Kueue deletes the job of a
// Workload it deactivated when its objectRetentionPolicies say so, and
// creating the same run again would only have it deactivated again. The
// run is over, and the job fails with Kueue's reason (deletedByKueue).
func deletedAfterDeactivation(s *scope) string {
	c := conditions.Get(s.tj, commonv1alpha1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonWorkloadDeactivated || s.tj.Status.Job == nil || s.tj.Status.Job.Name != s.jobName {
		return ""
	}
	return fmt.Sprintf("%s %s was deleted after Kueue deactivated its Workload, so the run is not created again. %s", s.tj.Status.Job.Kind, s.jobName, c.Message)
}

// DefaultWorkloadGrace is how long a queued child may stay without a
// Workload before its TrainingJob is Stalled. Kueue makes one within
// seconds when it manages the child's kind; the grace covers a Kueue that
// is restarting or slow.
const DefaultWorkloadGrace = 2 * time.Minute

// awaitWorkload handles a queued child that Kueue has made no Workload
// for. The child is created suspended for Kueue to admit; when Kueue is not
// installed (installed false: no Workload CRD), or does not manage the
// child's kind (its integration is off, or a Kubeflow kind's CRD was
// installed after Kueue started), nothing ever will, and only Kueue's
// configuration would say why. Past WorkloadGrace the job says it itself,
// naming the integration; it stays Stalled until a Workload appears (the
// Workload watch wakes it), and looks again at the end of each grace in
// case Workloads are not watched.
func (r *Reconciler) awaitWorkload(s *scope, installed bool) ctrl.Result {
	grace := r.WorkloadGrace
	if grace <= 0 {
		grace = DefaultWorkloadGrace
	}
	waited := s.now.Sub(s.job.GetCreationTimestamp().Time)
	if waited < grace {
		return ctrl.Result{RequeueAfter: grace - waited}
	}
	ref := s.be.Reference(s.tj, s.run)
	integration := KueueIntegration(ref)
	queueName, _ := s.localQueue()
	msg := fmt.Sprintf("Kueue is not installed (no Workload CRD), so nothing will admit %s %s from queue %s: "+
		"install Kueue with its %q integration on, or remove spec.queueName", ref.Kind, ref.Name, queueName, integration)
	if installed {
		msg = fmt.Sprintf("Kueue has made no Workload for %s %s in %s, so nothing will admit it: Kueue must run with its %q integration on "+
			"(integrations.frameworks in Kueue's configuration), and be restarted when the %s CRD was installed after it started",
			ref.Kind, ref.Name, waited.Round(time.Second), integration, ref.Kind)
	}
	s.queue = &queueObservation{noWorkload: msg}
	return ctrl.Result{RequeueAfter: grace}
}

// KueueIntegration is the name of Kueue's integration that manages the
// kind of ref, as Kueue's configuration lists it: "batch/job",
// "kubeflow.org/pytorchjob". The training-operator's kubeflow.org/v1 MPIJob
// has none (Kueue's "kubeflow.org/mpijob" is the MPI Operator's v2beta1
// MPIJob), which is why the kubeflow backend refuses queued MPI jobs
// before their child exists and no message names that integration.
func KueueIntegration(ref trainingv1alpha1.JobReference) string {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return strings.ToLower(ref.Kind)
	}
	return strings.ToLower(gv.Group + "/" + ref.Kind)
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
