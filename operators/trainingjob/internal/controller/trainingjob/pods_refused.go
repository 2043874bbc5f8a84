package trainingjob

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/podrefusal"
)

// The Job controller and the Kubeflow training-operator report a pod the
// API server refused (Pod Security admission, an exhausted ResourceQuota,
// a LimitRange, an admission webhook) only as a Warning event on the child,
// and neither says anything in the child's status. The operator reads those
// events and says the refusal on the TrainingJob, with the API server's own
// words, as the Running condition's reason and a Warning event.
// +kubebuilder:rbac:groups="",resources=events,verbs=list;watch

// refusalSources are the events that say a run's pods were refused, on
// either backend.
func refusalSources() []podrefusal.Source {
	return []podrefusal.Source{podrefusal.KubernetesController("Job"), podrefusal.KubeflowTrainingOperator, podrefusal.KubeflowMPILauncher}
}

// refusalToTrainingJob maps a refusal event to the TrainingJob of the run
// whose child it is about, by the child's name, <name>-r<run>; the
// reconcile matches the child's UID, so an event about anything else of
// that name changes nothing.
func refusalToTrainingJob(_ context.Context, e *corev1.Event) []reconcile.Request {
	name := e.InvolvedObject.Name
	i := strings.LastIndex(name, "-r")
	if i <= 0 {
		return nil
	}
	if _, err := strconv.ParseUint(name[i+2:], 10, 31); err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: name[:i]}}}
}

// observeRefusal finds the latest refusal of the current run's pods that
// is newer than its newest pod: a pod created after a refusal shows that
// the cause has gone, at least for that pod. Event and creation times
// count whole seconds, so a refusal must come at least a second after the
// newest pod; one within the same second is reported at the controller's
// next attempt, which refuses again.
func (r *Reconciler) observeRefusal(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job == nil || s.finished || s.state.Running != nil {
		return ctrl.Result{}, nil
	}
	since := s.job.GetCreationTimestamp().Time
	for _, p := range s.pods {
		if t := p.CreationTimestamp.Add(time.Second); t.After(since) {
			since = t
		}
	}
	e, err := r.Refusals.Latest(ctx, s.job.GetNamespace(), s.job.GetUID(), since)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.refusal = e
	return ctrl.Result{}, nil
}

// watchRefusals wakes a TrainingJob when its child reports a refused pod,
// and when a pod of a TrainingJob that shows a refusal is created at last,
// which clears the report. Other pod creations wake nothing: the child's
// status says what they change.
func (r *Reconciler) watchRefusals(mgr ctrl.Manager, b *builder.Builder) error {
	refusals, err := podrefusal.New(context.Background(), mgr, r.Namespaces, refusalSources()...)
	if err != nil {
		return err
	}
	r.Refusals = refusals
	for _, src := range refusals.Sources(refusalToTrainingJob) {
		b.WatchesRawSource(src)
	}
	b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.refusedOwner), builder.WithPredicates(predicate.Funcs{
		CreateFunc:  func(ctrlevent.CreateEvent) bool { return true },
		UpdateFunc:  func(ctrlevent.UpdateEvent) bool { return false },
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return false },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	}))
	return nil
}

// refusedOwner maps a new pod to its TrainingJob when that job, as cached,
// shows a refusal.
func (r *Reconciler) refusedOwner(ctx context.Context, pod client.Object) []reconcile.Request {
	return r.ownerWhen(ctx, pod, func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionRunning)
		return c != nil && c.Reason == commonv1alpha1.ReasonPodsRefused
	})
}

// ownerWhen maps a pod to its TrainingJob when that job, as cached,
// satisfies cond.
func (r *Reconciler) ownerWhen(ctx context.Context, pod client.Object, cond func(*trainingv1alpha1.TrainingJob) bool) []reconcile.Request {
	reqs := podToTrainingJob(ctx, pod)
	if len(reqs) == 0 {
		return nil
	}
	tj := &trainingv1alpha1.TrainingJob{}
	if err := r.Client.Get(ctx, reqs[0].NamespacedName, tj); err != nil || !cond(tj) {
		return nil
	}
	return reqs
}

// podsRefused says that the cluster refuses the run's pods. The message
// keeps the words of the refusal already recorded while only the name of
// the refused pod changes: the Job controller retries under a new name
// each time, and each attempt would otherwise cost a status write and an
// event.
func podsRefused(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if o.refusal == nil || tj.Spec.Suspend || o.job.SpecSuspended || o.job.Running != nil || o.job.Restarting != nil {
		return false
	}
	cause, words := podrefusal.Cause(o.refusal)
	msg := fmt.Sprintf("%s %s cannot create its pods (%s): %s", o.kind, o.jobName, cause, words)
	if c := conditions.Get(tj, trainingv1alpha1.ConditionRunning); c != nil && c.Reason == commonv1alpha1.ReasonPodsRefused && podrefusal.SameRefusal(c.Message, msg) {
		msg = c.Message
	}
	if o.localQueue != "" {
		markAdmitted(tj, o)
	}
	markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
	markInProgress(tj, commonv1alpha1.ReasonPodsRefused, msg)
	return true
}

// refusalEvent is the Warning event for a refusal that the status shows
// for the first time, or in other words than before.
func refusalEvent(before, after []metav1.Condition) *event {
	a := find(after, trainingv1alpha1.ConditionRunning)
	if a == nil || a.Reason != commonv1alpha1.ReasonPodsRefused {
		return nil
	}
	if b := find(before, trainingv1alpha1.ConditionRunning); b != nil && b.Reason == a.Reason && b.Message == a.Message {
		return nil
	}
	e := ev(corev1.EventTypeWarning, commonv1alpha1.ReasonPodsRefused, a.Message)
	return &e
}
