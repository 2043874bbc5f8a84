package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/restart"
	"github.com/ml-platform/ml-platform/shared/apireject"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/crdarrival"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/kueue"
)

// storePollInterval is how often a job waiting for a FeatureStore looks
// again when the FeatureStore CRD was not installed at start, so no watch
// can wake it.
const storePollInterval = time.Minute

// claimPollInterval is how often a job waiting for an existing checkpoint
// claim looks again: claims the user creates are outside the operator's
// label-restricted cache, so no watch wakes it.
const claimPollInterval = 10 * time.Second

// previousRunPollInterval is how often a job whose next run waits for the
// previous run's pods to stop looks again, besides the pod watch.
const previousRunPollInterval = 5 * time.Second

// scope carries what the phases of one reconcile learn.
type scope struct {
	tj  *trainingv1alpha1.TrainingJob
	now time.Time
	// finished is true when the outcome was recorded before this
	// reconcile started: only then are pods cleaned and the TTL applied.
	finished bool
	run      int32
	jobName  string
	// backend is the name of the job's backend and be the backend itself,
	// nil when it cannot run the job (the reason is in invalid).
	backend trainingv1alpha1.Backend
	be      backend.Backend
	// kindAway says that the kind of the job's child is not served in
	// this cluster (backend.Availability): no child of it can exist.
	// childMissing says that observeJob found no child of the current run.
	kindAway     bool
	childMissing bool
	job          client.Object
	// state is what the backend observed about job.
	state   backend.RunState
	created bool
	stores  *featureref.Resolution
	invalid error
	reason  string
	pods    []corev1.Pod
	// succeeded are the run's pods that succeeded, as metadata; those
	// being deleted are in pods too (deletingSucceeded).
	succeeded []metav1.PartialObjectMetadata
	// mayCreate is true when the current run's job is missing and may be
	// created now, as far as the gates before the checkpoint claim go.
	mayCreate bool
	// claim is the checkpoint claim's state; createdClaim is true when
	// the claim was created for this TrainingJob, by this reconcile or an
	// earlier one (annotationCreatedFor).
	claim        *claimObservation
	createdClaim bool
	// end is a run ended in this reconcile; decision explains a failed run
	// that is not restarted.
	end      *runEnd
	decision *restart.Decision
	// stale is true when the cache lags behind a decision already
	// recorded, or behind the failed pods that the run's child counts
	// (awaitFailedPods): the reconcile then writes nothing and looks
	// again.
	stale bool
	// refusal is the child's latest event saying that the API server
	// refused one of the run's pods, while it has not run; nil otherwise.
	refusal *corev1.Event
	// queue is what Kueue's Workload says about a child it holds.
	queue *queueObservation
	// deletedByKueue says that Kueue deleted the current run's child after
	// deactivating its Workload: the run is not created again.
	deletedByKueue string
	// unreleased says that a Workload of the child taken out of its queue
	// could not be released in this reconcile (releaseWorkloads): the
	// child stays suspended until it is.
	unreleased bool
	// admission is Kueue's admission of the child, read by the reconcile
	// that records it.
	admission *admission
	// policyTaken says that somebody else's NetworkPolicy holds the name
	// of the running job's policy.
	policyTaken error
	// companionTaken says that somebody else's object holds the name of
	// one of the run's companions (backend.Companions).
	companionTaken error
	// previousRunPods are the pods of the previous run that the next run
	// waits for, once its backoff passed.
	previousRunPods []string
}

func newScope(tj *trainingv1alpha1.TrainingJob, now time.Time) *scope {
	// Part 1 runs each TrainingJob once; the run index is already in the
	// child's name and in status so that restarts can add runs later.
	run := max(tj.Status.Run, 1)
	return &scope{
		tj:       tj,
		now:      now,
		finished: finished(tj),
		run:      run,
		jobName:  backend.JobName(tj.Name, run),
	}
}

func (s *scope) observation() observation {
	o := observation{
		jobName:       s.jobName,
		run:           s.run,
		stores:        s.stores,
		invalid:       s.invalid,
		invalidReason: s.reason,
		pods:          s.pods,
		refusal:       s.refusal,
		now:           s.now,
		claim:         s.claim,
		end:           s.end,
		decision:      s.decision,
		waitsFor:      s.previousRunPods,
		backend:       s.backend,
		queue:         s.queue,

		deletedByKueue: s.deletedByKueue,
		childGone:      s.childMissing || s.kindAway,
	}
	o.localQueue, o.byDefault = s.localQueue()
	if s.be != nil {
		ref := s.be.Reference(s.tj, s.run)
		o.ref = &ref
		o.kind = ref.Kind
	}
	if s.job != nil {
		st := s.state
		o.job = &st
		o.runStart = runStart(s.tj, st)
	}
	return o
}

// runStart is when the current run started: when the child says it
// started, else when the TrainingJob was seen running.
func runStart(tj *trainingv1alpha1.TrainingJob, st backend.RunState) *metav1.Time {
	if st.StartTime != nil {
		return st.StartTime.DeepCopy()
	}
	if c := conditions.Get(tj, trainingv1alpha1.ConditionRunning); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.DeepCopy()
	}
	return nil
}

func finished(tj *trainingv1alpha1.TrainingJob) bool { return conditions.IsFinished(tj) }

// localQueue is the LocalQueue of the current run's child: spec.queueName,
// else the default LocalQueue that Kueue put the child in (byDefault): in a
// namespace with a LocalQueue named default, Kueue labels every job created
// without a queue with it, and refuses taking the label off. Such a child is
// Kueue's as much as one queued by the user: Kueue admits it, and suspends
// it again when anybody else unsuspends it. The operator marks each queue
// label it sets from spec.queueName (backend.QueueFromSpec), so a default
// label without the mark on a child of an unqueued TrainingJob was put
// there by Kueue, or stayed there when Kueue refused taking it out
// (convergeQueueLabel, which then drops the mark), or was set by an
// operator older than the mark, and keeps the meaning it had then. A
// marked one is left from a spec.queueName the user since removed, maybe
// naming a LocalQueue the namespace lacks: convergeQueueLabel takes it off
// like any other queue's.
func (s *scope) localQueue() (name string, byDefault bool) {
	if q := s.tj.Spec.QueueName; q != "" {
		return q, false
	}
	if s.job != nil && s.job.GetLabels()[trainingv1alpha1.LabelKueueQueueName] == kueue.DefaultLocalQueue && !backend.QueueFromSpec(s.job) {
		return kueue.DefaultLocalQueue, true
	}
	return "", false
}

// queued is true when Kueue holds the current run's child in a LocalQueue:
// its suspend flag is Kueue's.
func (s *scope) queued() bool {
	q, _ := s.localQueue()
	return q != ""
}

// suspendedWithoutChild is true when the current run has no child because
// the user suspended the job while Kueue held it: a queued job's run ends
// when it is suspended (Kueue would unsuspend its child once admitted), and
// the next one is created on resume. That holds for a job queued by
// spec.queueName, and for one whose previous run Kueue's default LocalQueue
// held and that the user suspended: creating its next child now would put
// it in the default LocalQueue again, and Kueue would run it.
func suspendedWithoutChild(tj *trainingv1alpha1.TrainingJob) bool {
	if !tj.Spec.Suspend {
		return false
	}
	if tj.Spec.QueueName != "" {
		return true
	}
	runs := tj.Status.Runs
	return len(runs) > 0 && runs[len(runs)-1].Reason == ReasonSuspended && runs[len(runs)-1].Run == max(tj.Status.Run, 1)-1
}

// observeJob observes the current run's job and adopts it; when it is
// missing, it decides whether the job may be created now (s.mayCreate),
// or how long to wait. A finished run's job is never recreated.
func (r *Reconciler) observeJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.finished || s.be == nil {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKey{Namespace: s.tj.Namespace, Name: s.jobName}
	job := s.be.Empty(s.tj)
	err := r.Client.Get(ctx, key, job)
	if apierrors.IsNotFound(err) && s.tj.Status.ObservedGeneration > 0 {
		// The cache sees only labelled jobs and may lag behind our own
		// create; one live read before creating keeps a job that lost its
		// label, or a foreign job under our name, from costing a failed
		// create on every reconcile. A job the operator never wrote status
		// for goes without it: its first create either succeeds or finds
		// the job and reads it then (create), and the read would cost every
		// new TrainingJob a round trip before its child, when the API server
		// is busiest.
		err = r.APIReader.Get(ctx, key, job)
	}
	switch {
	case err == nil:
		return ctrl.Result{}, r.adopt(ctx, s, job)
	case crdarrival.NotServed(err) && !apierrors.IsNotFound(err) && isAvailability(s.be):
		// The REST mapper no longer knows the kind; a 404 goes on to the
		// create, which tells a missing kind from a missing job.
		kindGone(s)
		s.childMissing = true
		return ctrl.Result{RequeueAfter: kindGoneRecheck}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	s.childMissing = true
	if rejected(s.tj) {
		// The API refused this generation's child; only a change of the
		// spec (a new generation) tries again.
		s.invalid, s.reason = errors.New(conditions.Get(s.tj, commonv1alpha1.ConditionStalled).Message), commonv1alpha1.ReasonChildRejected
		return ctrl.Result{}, nil
	}
	if s.deletedByKueue = deletedAfterDeactivation(s); s.deletedByKueue != "" {
		return ctrl.Result{}, nil
	}
	wait, ok, err := r.mayCreateRun(ctx, s)
	s.mayCreate = ok && err == nil
	return ctrl.Result{RequeueAfter: wait}, err
}

// deadlineEnd is when runPolicy.activeDeadlineSeconds ends the job: that
// long after deadlineStart, whatever runs it took. current is when the
// run that is ending started, which its record does not hold yet.
func deadlineEnd(tj *trainingv1alpha1.TrainingJob, current *metav1.Time) (time.Time, bool) {
	d, start := tj.Spec.RunPolicy.ActiveDeadlineSeconds, deadlineStart(tj, current)
	if d == nil || start == nil {
		return time.Time{}, false
	}
	return start.Add(time.Duration(*d) * time.Second), true
}

// deadlineStart is when the job's deadline began: status.deadlineStartTime
// (see restartDeadline), else, while it is unset, as a job written before
// the field existed recorded it: when the job first ran, or, once the user
// suspended a queued job, when the first run after that started. Nil when
// no run counts yet: the next run gets the whole deadline.
func deadlineStart(tj *trainingv1alpha1.TrainingJob, current *metav1.Time) *metav1.Time {
	if start := tj.Status.DeadlineStartTime; start != nil {
		return start
	}
	start, runs := tj.Status.StartTime, tj.Status.Runs
	for i := range runs {
		if runs[i].Reason != ReasonSuspended {
			continue
		}
		start = current
		if i+1 < len(runs) {
			start = runs[i+1].StartTime
		}
	}
	return start
}

// withRemainingDeadline is tj with the deadline a new run's child gets:
// what is left of runPolicy.activeDeadlineSeconds since deadlineStart (a
// first run, and the first after a resume, gets it whole), so restarts
// never make a job run longer than its user allowed. A run that starts
// after the end gets one second, which its child's controller ends as a
// deadline.
func withRemainingDeadline(tj *trainingv1alpha1.TrainingJob, now time.Time) *trainingv1alpha1.TrainingJob {
	end, ok := deadlineEnd(tj, nil)
	if !ok {
		return tj
	}
	left := int64(max(math.Ceil(end.Sub(now).Seconds()), 1))
	if left >= *tj.Spec.RunPolicy.ActiveDeadlineSeconds {
		return tj
	}
	out := tj.DeepCopy()
	out.Spec.RunPolicy.ActiveDeadlineSeconds = &left
	return out
}

// createJob creates the current run's job when observeJob allowed it, the
// checkpoint claim is ready and every referenced FeatureStore is Ready.
func (r *Reconciler) createJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !s.mayCreate || (s.claim != nil && !s.claim.ready) {
		return ctrl.Result{}, nil
	}
	var stores []featureref.Store
	if len(s.tj.Spec.FeatureStores) > 0 {
		res, err := featureref.Resolve(ctx, r.Client, s.tj.Namespace, s.tj.Spec.FeatureStores)
		if err != nil {
			return ctrl.Result{}, err
		}
		s.stores = &res
		if !res.AllReady() {
			if !r.WatchesFeatureStores {
				return ctrl.Result{RequeueAfter: storePollInterval}, nil
			}
			return ctrl.Result{}, nil
		}
		stores = res.Ready
	}
	desired, err := s.be.Build(withRemainingDeadline(s.tj, s.now), s.run, stores)
	if invalid := (*backend.InvalidSpecError)(nil); errors.As(err, &invalid) {
		s.invalid, s.reason = invalid, commonv1alpha1.ReasonInvalidSpec
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if err := controllerutil.SetControllerReference(s.tj, desired, r.Client.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.create(ctx, s, desired); err != nil {
		return ctrl.Result{}, err
	}
	if s.reason == ReasonBackendUnavailable {
		return ctrl.Result{RequeueAfter: kindGoneRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// kindGone says that the API server no longer serves the kind of the
// job's child, as the kind's CRD watch says it for every job of the kind
// once it has seen the CRD go.
func kindGone(s *scope) {
	ref := s.be.Reference(s.tj, s.run)
	s.invalid, s.reason = kubeflowDeparted(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)), ReasonBackendUnavailable
}

// kindGoneRecheck is how soon a job whose child's create found the kind
// no longer served looks again, in case the watch of the kind's CRD,
// which wakes every job of the kind when it comes back, saw no departure.
const kindGoneRecheck = 30 * time.Second

// create creates the run's job and handles what the API server answers.
func (r *Reconciler) create(ctx context.Context, s *scope, desired client.Object) error {
	err := r.Client.Create(ctx, desired)
	switch {
	case err == nil:
		s.job, s.created, s.state = desired, true, s.be.Observe(desired)
		return r.ensureCompanions(ctx, s)
	case apierrors.IsAlreadyExists(err):
		// Created in between by a concurrent reconcile or by somebody else.
		live := s.be.Empty(s.tj)
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
			return err
		}
		return r.adopt(ctx, s, live)
	case finalizer.IsNamespaceTerminatingError(err):
		return nil
	case apireject.Is(err):
		s.invalid = fmt.Errorf("the API server rejected %s %s: %s", s.be.Reference(s.tj, s.run).Kind, s.jobName, apireject.Message(err))
		s.reason = commonv1alpha1.ReasonChildRejected
		return nil
	case crdarrival.NotServed(err) && isAvailability(s.be):
		// The child's CRD is being deleted or is gone (its jobs went with
		// it). The CRD's watch makes the kind unavailable for every job
		// (kubeflowArrivals); until it has, this job says so rather than
		// retrying in a loop.
		kindGone(s)
		return nil
	default:
		return fmt.Errorf("creating %s %s: %w", s.be.Reference(s.tj, s.run).Kind, s.jobName, err)
	}
}

// mayCreateRun says whether the current run's job may be created now, or
// how long to wait: never while a queued job is suspended (its run is only
// created on resume), not before the backoff recorded in nextRunTime has
// passed, and not while pods of the previous run still run (so two runs
// never write the same checkpoints). The checkpoint claim is the next
// phase's gate.
func (r *Reconciler) mayCreateRun(ctx context.Context, s *scope) (time.Duration, bool, error) {
	if suspendedWithoutChild(s.tj) {
		return 0, false, nil
	}
	if next := s.tj.Status.NextRunTime; next != nil && s.now.Before(next.Time) {
		return next.Sub(s.now), false, nil
	}
	if s.run > 1 {
		active, err := r.activePods(ctx, s, s.run-1, true)
		if err != nil {
			return 0, false, err
		}
		if len(active) > 0 {
			// Said in status: a pod on a node that is gone can stay
			// terminating until somebody deletes the node.
			s.previousRunPods = active
			return previousRunPollInterval, false, nil
		}
	}
	return 0, true, nil
}

// activePods names the pods of a run that have not finished, from the
// cache; terminating ones only when asked.
func (r *Reconciler) activePods(ctx context.Context, s *scope, run int32, terminating bool) ([]string, error) {
	pods, err := r.runPods(ctx, s.tj, run)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if terminating || p.DeletionTimestamp.IsZero() {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// retirePreviousRun stops what is left of the previous run once status
// moved on to the current one. A previous run that did not finish was
// ended by suspending a queued job: its Kubeflow job is deleted, which
// gives Kueue its quota back. A failed previous run keeps its job (and
// finished pods, for their logs), but Kubeflow's clean-pod policy None left
// its other pods running, holding accelerators and the checkpoint volume:
// those are deleted. Both are idempotent and write nothing once done.
func (r *Reconciler) retirePreviousRun(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.finished || s.be == nil || s.run <= 1 {
		return ctrl.Result{}, nil
	}
	prev := s.run - 1
	job := s.be.Empty(s.tj)
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.tj.Namespace, Name: backend.JobName(s.tj.Name, prev)}, job)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	if err != nil || !metav1.IsControlledBy(job, s.tj) || !job.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, err
	}
	if !s.be.Observe(job).Finished() {
		uid := job.GetUID()
		err := r.Client.Delete(ctx, job, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	active, err := r.activePods(ctx, s, prev, false)
	if err != nil || len(active) == 0 {
		return ctrl.Result{}, err
	}
	err = r.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(s.tj.Namespace),
		client.MatchingLabels(backend.Labels(r.Settings.OperatorName, s.tj.Name, prev)),
		client.MatchingFieldsSelector{Selector: fields.AndSelectors(
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
		)})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting the pods of run %d: %w", prev, err)
	}
	return ctrl.Result{}, nil
}

// decideRunEnd decides what follows the current run when it ended without
// succeeding: a failed run is classified, once the cache holds the failed
// pods its child counts or their grace has passed (awaitFailedPods), and,
// under the checkpoint's policy, followed by a new run; a queued job the
// user suspends ends its run. The decision is recorded in status (run index, restart count,
// nextRunTime) before anything acts on it, and only after a live read
// confirms that status still names this run: a cache that lags behind an
// earlier decision must not make a second one.
func (r *Reconciler) decideRunEnd(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.finished || s.job == nil {
		return ctrl.Result{}, nil
	}
	st := s.state
	if st.Succeeded != nil {
		return ctrl.Result{}, nil
	}
	start := runStart(s.tj, st)
	var end *runEnd
	if failed := st.Failed; failed != nil {
		if wait := r.awaitFailedPods(s); wait > 0 {
			// The cache lags the run's failed pods: this reconcile
			// records nothing, and the pod's arrival or the end of the
			// grace brings the one that does.
			s.stale = true
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		f := classifyRun(s.tj, st, s.pods)
		d := restart.Decide(s.tj.Spec.Checkpoint, s.tj.Status.RestartCount, f, s.now)
		if deadline, ok := deadlineEnd(s.tj, start); ok && d.Restart && !d.NextRunTime.Before(deadline) {
			d = restart.Decision{Reason: restart.ReasonDeadline, Message: fmt.Sprintf(
				"runPolicy.activeDeadlineSeconds (%ds, counted from %s) ends before run %d could start", *s.tj.Spec.RunPolicy.ActiveDeadlineSeconds, deadlineStart(s.tj, start).UTC().Format(time.RFC3339), s.run+1)}
		}
		if !d.Restart {
			s.decision = &d
			return ctrl.Result{}, nil
		}
		next := metav1.NewTime(ceilSecond(d.NextRunTime))
		limit := ptr.Deref(s.tj.Spec.Checkpoint.MaxRestarts, restart.DefaultMaxRestarts)
		end = &runEnd{
			restart:     true,
			nextRunTime: &next,
			record:      trainingv1alpha1.RunRecord{Run: s.run, Reason: f.Cause, Class: f.Class, Message: f.Message, StartTime: start, EndTime: timeOr(failed.Time, s.now)},
			message: fmt.Sprintf("Run %d failed: %s. Run %d starts from the last checkpoint at %s (restart %d of %d)",
				s.run, f.Message, s.run+1, next.UTC().Format(time.RFC3339), s.tj.Status.RestartCount+1, limit),
		}
	} else if s.queued() && s.tj.Spec.Suspend {
		end = &runEnd{
			record:  trainingv1alpha1.RunRecord{Run: s.run, Reason: ReasonSuspended, Message: "Suspended by the user", StartTime: start, EndTime: &metav1.Time{Time: s.now.Truncate(time.Second)}},
			message: fmt.Sprintf("The job is suspended: run %d ended and its %s is deleted, which gives Kueue its quota back; run %d starts when suspend is false", s.run, s.be.Reference(s.tj, s.run).Kind, s.run+1),
		}
	} else {
		return ctrl.Result{}, nil
	}
	end.next = s.run + 1

	live := &trainingv1alpha1.TrainingJob{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.tj), live); err != nil {
		return ctrl.Result{}, err
	}
	if max(live.Status.Run, 1) != s.run || live.UID != s.tj.UID {
		s.stale = true
		return ctrl.Result{RequeueAfter: staleRequeue}, nil
	}
	s.end = end
	return ctrl.Result{}, nil
}

// ceilSecond rounds up to the second that status can hold, so that a run
// never starts before its backoff has passed.
func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}

// convergeQueueLabel makes the Kueue queue label of the current run's job
// follow spec.queueName, and its WorkloadPriorityClass label follow the
// TrainingJob's, while the job waits in its queue. Kueue does not move
// admitted workloads, so an admitted job keeps its queue (the CRD rejects
// the change; one that raced with the admission takes effect with the
// next run). Kueue v0.17 updates a Workload's priority when its job's
// priority class changes and lets a suspended job gain one, but refuses
// removing it (jobframework's ValidateUpdateForWorkloadPriorityClassName):
// a label removed from the TrainingJob stays on the job. A child Kueue put
// in its default LocalQueue keeps that queue (localQueue). Each write of
// the queue label marks where it came from (backend.WithQueueMark), in the
// same patch. It runs before convergeSuspend: a job taken out of its queue
// loses the label before the operator unsuspends it.
func (r *Reconciler) convergeQueueLabel(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job == nil || s.finished || s.end != nil || !s.state.SpecSuspended {
		return ctrl.Result{}, nil
	}
	want := queueLabels(s)
	if maps.Equal(s.job.GetLabels(), want) {
		// A child whose label is right but unmarked (an older operator's)
		// is left alone: it keeps what that operator meant (localQueue),
		// and marking it would cost every waiting job a write on upgrade.
		return ctrl.Result{}, nil
	}
	mark := backend.WithQueueMark(s.job.GetAnnotations(), s.tj)
	err := r.patchQueue(ctx, s, want, mark)
	if _, ok := want[trainingv1alpha1.LabelKueueQueueName]; !ok && refusedForDefaultQueue(err) {
		// Taken out of its queue in a namespace with a default LocalQueue:
		// Kueue keeps every job there in a queue, so the child moves to the
		// default one, as a job created without a queue would. That is
		// Kueue's rule, not the spec's: the mark goes (mark has none, as
		// the spec names no queue), and the label stays from now on.
		want[trainingv1alpha1.LabelKueueQueueName] = kueue.DefaultLocalQueue
		err = r.patchQueue(ctx, s, want, mark)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("setting the queue of %s %s: %w", s.be.Reference(s.tj, s.run).Kind, s.jobName, err)
	}
	return ctrl.Result{}, nil
}

// queueLabels are the labels the current run's child should carry: its
// own, with the TrainingJob's queue and priority class, or Kueue's default
// LocalQueue where Kueue put it.
func queueLabels(s *scope) map[string]string {
	want := backend.WithQueueLabel(s.job.GetLabels(), s.tj)
	if q, byDefault := s.localQueue(); byDefault {
		want[trainingv1alpha1.LabelKueueQueueName] = q
	}
	return want
}

// patchQueue sets the labels and annotations of the current run's child,
// in one patch.
func (r *Reconciler) patchQueue(ctx context.Context, s *scope, labels, annotations map[string]string) error {
	base := s.job.DeepCopyObject().(client.Object)
	s.job.SetLabels(labels)
	s.job.SetAnnotations(annotations)
	if err := r.Client.Patch(ctx, s.job, client.MergeFrom(base)); err != nil {
		s.job.SetLabels(base.GetLabels())
		s.job.SetAnnotations(base.GetAnnotations())
		return err
	}
	return nil
}

// refusedForDefaultQueue is true when Kueue's webhook refused removing a
// job's queue label because the namespace has a default LocalQueue
// (jobframework's validateUpdateForQueueName). The webhook's denial
// carries no reason of its own (it is a 403, not Invalid): its words are
// what identifies it.
func refusedForDefaultQueue(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "must not be empty in namespace with default queue")
}

// adopt accepts an existing job as the run's job when this TrainingJob
// controls it, and restores the labels the operator's cache selects on.
func (r *Reconciler) adopt(ctx context.Context, s *scope, job client.Object) error {
	if err := apply.Check(job, s.be.Reference(s.tj, s.run).Kind, apply.ControlledBy(s.tj, "TrainingJob")); err != nil {
		s.invalid, s.reason = err, commonv1alpha1.ReasonNameTaken
		return nil //nolint:nilerr // a name taken is recorded in status (Stalled), for a person to fix; retrying cannot
	}
	s.job, s.state = job, s.be.Observe(job)
	if !s.state.Finished() {
		if err := r.ensureCompanions(ctx, s); err != nil {
			return err
		}
	}
	want := backend.Labels(r.Settings.OperatorName, s.tj.Name, s.run)
	missing := false
	for k, v := range want {
		if job.GetLabels()[k] != v {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	base := job.DeepCopyObject().(client.Object)
	labels := job.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range want {
		labels[k] = v
	}
	job.SetLabels(labels)
	return r.Client.Patch(ctx, job, client.MergeFrom(base))
}

// convergeSuspend makes the child's suspend flag follow spec.suspend for
// jobs without a queue. It is the only field of the job's spec the
// operator changes after creating it: everything else in the spec is
// immutable, and fields that admission webhooks or Kueue set on the job
// (nodeSelector, tolerations on admission) are left alone.
func (r *Reconciler) convergeSuspend(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job == nil || s.finished || s.end != nil || s.queued() {
		// A queued job's suspend belongs to Kueue, whether the user or
		// Kueue's default LocalQueue queued it.
		return ctrl.Result{}, nil
	}
	if s.state.Finished() {
		return ctrl.Result{}, nil
	}
	want := backend.Suspend(s.tj)
	if s.state.SpecSuspended == want {
		return ctrl.Result{}, nil
	}
	if !want && (s.unreleased || s.job.GetLabels()[trainingv1alpha1.LabelKueueQueueName] != "") {
		// Still Kueue's: its queue label could not be taken off, or its
		// Workload not released, in this reconcile (the phases before
		// failed). Unsuspended now, Kueue would suspend it again, or admit
		// its Workload for a job that runs anyway.
		return ctrl.Result{}, nil
	}
	if err := r.Client.Patch(ctx, s.job, s.be.SuspendPatch(want)); err != nil {
		return ctrl.Result{}, fmt.Errorf("setting suspend=%t on %s %s: %w", want, s.be.Reference(s.tj, s.run).Kind, s.jobName, err)
	}
	return ctrl.Result{}, nil
}

// runSelector selects the pods of a run of tj that the operator generated.
func (r *Reconciler) runSelector(tj *trainingv1alpha1.TrainingJob, run int32) client.MatchingLabels {
	return client.MatchingLabels(backend.Labels(r.Settings.OperatorName, tj.Name, run))
}

// observePods reads the run's pods from the cache, for the failure
// explanation, the re-emitted pod problems and the clean-pod policy: those
// that did not succeed, and those that succeeded while being deleted.
func (r *Reconciler) observePods(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job == nil && !s.finished {
		return ctrl.Result{}, nil
	}
	pods, err := r.runPods(ctx, s.tj, s.run)
	if err != nil {
		return ctrl.Result{}, err
	}
	if s.succeeded, err = r.succeededRunPods(ctx, s.tj, s.run); err != nil {
		return ctrl.Result{}, err
	}
	s.pods = pods
	s.pods = append(s.pods, deletingSucceeded(s.succeeded)...)
	return r.observeRefusal(ctx, s)
}

// runPodsField indexes the cached pods by their run, <TrainingJob>/<run>:
// a reconcile reads its run's pods, not every pod of the namespace (a
// namespace of 300 jobs of 4 pods had each reconcile match 1 200 pods'
// labels twice).
const runPodsField = "trainingjob.run"

func runKey(trainingJob, run string) string {
	return trainingJob + "/" + run
}

// indexRunPods registers runPodsField with the manager's cache.
func indexRunPods(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, runPodsField, runOfPod)
}

// runOfPod is a pod's key in runPodsField.
func runOfPod(o client.Object) []string {
	l := o.GetLabels()
	if l[trainingv1alpha1.LabelJobName] == "" || l[trainingv1alpha1.LabelRun] == "" {
		return nil
	}
	return []string{runKey(l[trainingv1alpha1.LabelJobName], l[trainingv1alpha1.LabelRun])}
}

// runPods are the cached pods of a run of tj that the operator labelled.
// A Reconciler that no manager set up (one called by hand) has no index
// and selects by labels.
func (r *Reconciler) runPods(ctx context.Context, tj *trainingv1alpha1.TrainingJob, run int32) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	by := client.ListOption(r.runSelector(tj, run))
	if r.runPodsIndexed {
		by = client.MatchingFields{runPodsField: runKey(tj.Name, strconv.Itoa(int(run)))}
	}
	if err := r.Client.List(ctx, pods, client.InNamespace(tj.Namespace), by); err != nil {
		return nil, err
	}
	return operatorsOnly(r, pods.Items), nil
}

// operatorsOnly keeps, in place, the pods that carry r's managed-by label.
func operatorsOnly[T any, P interface {
	*T
	GetLabels() map[string]string
}](r *Reconciler, pods []T) []T {
	out := pods[:0]
	for i := range pods {
		if P(&pods[i]).GetLabels()[commonv1alpha1.LabelManagedBy] == r.Settings.OperatorName {
			out = append(out, pods[i])
		}
	}
	return out
}

// cleanPods applies the clean-pod policy once the outcome is recorded, so
// that a failed pod's termination message is in status before the pod goes.
// It writes only while matching pods exist, with one collection delete. The
// pods that succeeded, which only the policy All deletes, are found in
// their own cache (succeeded_pods.go).
func (r *Reconciler) cleanPods(ctx context.Context, s *scope) (ctrl.Result, error) {
	policy := s.tj.Spec.RunPolicy.CleanPodPolicy
	if policy == "" {
		policy = trainingv1alpha1.CleanPodPolicyRunning
	}
	if policy == trainingv1alpha1.CleanPodPolicyNone {
		return ctrl.Result{}, nil
	}
	onlyUnfinished := policy == trainingv1alpha1.CleanPodPolicyRunning
	found := false
	for _, p := range s.pods {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if onlyUnfinished && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			continue
		}
		found = true
	}
	if !found && !onlyUnfinished {
		found = slices.ContainsFunc(s.succeeded, func(p metav1.PartialObjectMetadata) bool { return p.DeletionTimestamp.IsZero() })
	}
	if !found {
		return ctrl.Result{}, nil
	}
	opts := []client.DeleteAllOfOption{client.InNamespace(s.tj.Namespace), r.runSelector(s.tj, s.run)}
	if onlyUnfinished {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fields.AndSelectors(
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
		)})
	}
	if err := r.Client.DeleteAllOf(ctx, &corev1.Pod{}, opts...); err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting pods by clean-pod policy %s: %w", policy, err)
	}
	return ctrl.Result{}, nil
}

// expireTTL deletes a finished TrainingJob once ttlSecondsAfterFinished has
// passed since it finished: status.completionTime, the time its child
// recorded, else its terminal condition's lastTransitionTime. Both are
// persisted, so the deadline survives operator restarts.
func (r *Reconciler) expireTTL(ctx context.Context, tj *trainingv1alpha1.TrainingJob) (ctrl.Result, error) {
	expiry, ok := ttlExpiry(tj)
	if !ok {
		return ctrl.Result{}, nil
	}
	if wait := expiry.Sub(r.Clock.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	err := r.Client.Delete(ctx, tj, client.Preconditions{UID: &tj.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(tj, corev1.EventTypeNormal, "Expired", "Deleted %ds after it finished (ttlSecondsAfterFinished)", *tj.Spec.RunPolicy.TTLSecondsAfterFinished)
	return ctrl.Result{}, nil
}

// ttlExpiry is when a finished TrainingJob is due for deletion.
func ttlExpiry(tj *trainingv1alpha1.TrainingJob) (time.Time, bool) {
	ttl := tj.Spec.RunPolicy.TTLSecondsAfterFinished
	if ttl == nil {
		return time.Time{}, false
	}
	for _, t := range []string{commonv1alpha1.ConditionSucceeded, commonv1alpha1.ConditionFailed} {
		if c := conditions.Get(tj, t); c != nil && c.Status == metav1.ConditionTrue {
			// The end the child recorded, not when the operator noticed:
			// after an outage the two differ by the outage.
			end := c.LastTransitionTime.Time
			if ct := tj.Status.CompletionTime; ct != nil && ct.Before(&c.LastTransitionTime) {
				end = ct.Time
			}
			return end.Add(time.Duration(*ttl) * time.Second), true
		}
	}
	return time.Time{}, false
}
