package trainingjob

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/failure"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/restart"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

// Condition reasons of a TrainingJob, each one CamelCase word.
const (
	ReasonJobCreated    = "JobCreated"
	ReasonJobNotCreated = "JobNotCreated"
	ReasonPodsPending   = "PodsPending"
	ReasonRunning       = "Running"
	ReasonRestarting    = "Restarting"
	ReasonSuspending    = "Suspending"
	ReasonSuspended     = "Suspended"
	ReasonNotSuspended  = "NotSuspended"
	ReasonResuming      = "Resuming"
	ReasonSucceeded     = "Succeeded"
	ReasonFailed        = "Failed"
	ReasonFinished      = "Finished"
	// ReasonInProgress: the job has not finished yet.
	ReasonInProgress = "InProgress"
	// Queue reasons: waiting for Kueue's first admission, waiting again
	// after Kueue evicted the job, and admitted.
	ReasonQueued   = "Queued"
	ReasonWaiting  = "Waiting"
	ReasonEvicted  = "Evicted"
	ReasonAdmitted = "Admitted"
	// ReasonNoWorkload: Kueue made no Workload for the queued child, so
	// it does not manage the child's kind and will never admit it.
	ReasonNoWorkload = "NoWorkload"
	// ReasonWorkloadDeactivated: Kueue deactivated the child's Workload
	// (spec.active false, by an administrator or by Kueue itself, e.g. past
	// waitForPodsReady's requeue limit): nothing admits it until it is
	// active again.
	ReasonWorkloadDeactivated = "WorkloadDeactivated"
	// ReasonWorkloadFinished: Kueue declared the child's Workload finished
	// although the child never ran (e.g. FailedToStart).
	ReasonWorkloadFinished = "WorkloadFinished"
	// ReasonRunStarted closes the Restarting condition once the next run's
	// Kubeflow job exists.
	ReasonRunStarted = "RunStarted"
	// Checkpoint claim reasons.
	ReasonClaimReady        = "ClaimReady"
	ReasonAccessModeMissing = "AccessModeNotOffered"
)

// maxRunHistory bounds status.runs, as the CRD does.
const maxRunHistory = 10

// maxTerminationMessage bounds what status copies from a container: the
// kubelet caps a termination message at 4096 bytes already, and status
// must stay small.
const maxTerminationMessage = 4096

// observation is everything a reconcile learned about a TrainingJob's
// world; setStatus turns it into status without further reads.
type observation struct {
	// kind and jobName name the child of the current run.
	kind    string
	jobName string
	run     int32
	// job is what the backend observed about the run's child; nil when the
	// child does not exist (yet).
	job *backend.RunState
	// childGone says that a missing job is known to be missing: the
	// reconcile found no child, or its kind is not served (an error while
	// looking leaves it false).
	childGone bool
	// ref names the run's child; backend is the job's backend.
	ref     *trainingv1alpha1.JobReference
	backend trainingv1alpha1.Backend
	// stores is the FeatureStore resolution, nil when none was needed.
	stores *featureref.Resolution
	// invalid is why the job cannot be created until a person acts.
	invalid error
	// invalidReason is the condition reason for invalid.
	invalidReason string
	// pods are the pods of the current run, for the failure explanation.
	pods []corev1.Pod
	// refusal is the child's latest report of a refused pod, if any.
	refusal *corev1.Event
	now     time.Time
	// claim is what was learned about the checkpoint claim; nil when it
	// was not looked at in this reconcile.
	claim *claimObservation
	// end is a run that ended in this reconcile with a decision confirmed
	// against the live object: a restart, or a queued job's suspension.
	end *runEnd
	// decision is why a failed run was not restarted, for the message.
	decision *restart.Decision
	// waitsFor are the previous run's pods that the next run waits for.
	waitsFor []string
	// runStart is when the current run's Kubeflow job started, if known.
	runStart *metav1.Time
	// queue is what Kueue says about the wait, nil when unknown.
	queue *queueObservation
	// localQueue is the LocalQueue of the run's child, empty when Kueue
	// does not hold it; byDefault says that Kueue put it there, in its
	// default LocalQueue, as the TrainingJob names none (scope.localQueue).
	localQueue string
	byDefault  bool
	// deletedByKueue says that Kueue deleted the run's child after
	// deactivating its Workload.
	deletedByKueue string
}

// claimObservation is the state of the checkpoint claim.
type claimObservation struct {
	name string
	// ready is true when the claim exists and offers the access mode.
	ready bool
	// stalled is true when only a person can make it ready.
	stalled         bool
	reason, message string
}

// runEnd is the end of the current run and what follows it.
type runEnd struct {
	record trainingv1alpha1.RunRecord
	// next is the run that follows.
	next int32
	// restart is true when a failure ended the run, which counts as a
	// restart; false for a suspension of a queued job.
	restart     bool
	nextRunTime *metav1.Time
	message     string
}

// setStatus computes the TrainingJob's status from what was observed. A
// recorded outcome (Succeeded or Failed) is final: the job's pods and even
// its child may be gone since, and must not be re-read into it. Which
// conditions a job shows is decided by the first rule of a named chain that
// applies: waitingRules while the run has no child, runRules once it has.
func setStatus(tj *trainingv1alpha1.TrainingJob, o observation) {
	if tj.Status.Backend == "" && o.backend != "" {
		// Recorded once, so a later change of the operator's default never
		// moves the job.
		tj.Status.Backend = o.backend
	}
	if conditions.IsFinished(tj) {
		return
	}
	if tj.Status.Run == 0 {
		tj.Status.Run = o.run
	}
	// Only a job waiting in its queue has a place in it (waitingInQueue).
	tj.Status.Queue = nil
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionFinished, ReasonInProgress, "The job has not finished")
	markClaim(tj, o)
	if o.end != nil {
		endRun(tj, o)
		return
	}
	markStores(tj, o)
	restartDeadline(tj, o)
	rules := runRules
	if o.job == nil {
		tj.Status.Phase = trainingv1alpha1.PhasePending
		conditions.MarkFalse(tj, trainingv1alpha1.ConditionCreated, ReasonJobNotCreated, fmt.Sprintf("%s %s does not exist yet", o.kind, o.jobName))
		if o.childGone && conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning) {
			// The running run's child is gone (deleted, or with its CRD),
			// and its pods with it: nothing runs until a new child does.
			conditions.MarkFalse(tj, trainingv1alpha1.ConditionRunning, ReasonJobNotCreated, fmt.Sprintf("The run's %s is gone", orDefault(o.kind, "job")))
		}
		rules = waitingRules
	} else {
		markCreated(tj, o)
	}
	for _, r := range rules {
		if r.apply(tj, o) {
			return
		}
	}
}

// statusRule sets the conditions of one situation and says whether it
// applied; the first rule that applies decides.
type statusRule struct {
	name  string
	apply func(tj *trainingv1alpha1.TrainingJob, o observation) bool
}

// waitingRules decide the status of a run without a child, most pressing
// first.
var waitingRules = []statusRule{
	{"deleted by Kueue", deletedByKueue},
	{"suspended in its queue", suspendedWithoutJob},
	{"cannot be created", stalledWithoutJob},
	{"checkpoint claim needs a person", claimStalled},
	{"waiting for the checkpoint claim", claimWaiting},
	{"backing off before the next run", backingOff},
	{"waiting for FeatureStores", storesWaiting},
	{"creating", creating},
}

// runRules decide the status of a run whose child exists.
var runRules = []statusRule{
	{"succeeded", succeeded},
	{"failed", failed},
	{"finished by Kueue", finishedByKueue},
	{"waiting in the queue", waitingInQueue},
	{"pods refused", podsRefused},
	{"admitted, pods pending", admittedPending},
	{"suspended", suspended},
	{"suspending", suspending},
	{"resuming", resuming},
	{"restarting pods", restartingPods},
	{"running", running},
	{"still running", stillRunning},
	{"pods pending", podsPending},
}

func markClaim(tj *trainingv1alpha1.TrainingJob, o observation) {
	switch {
	case o.claim == nil:
	case o.claim.ready:
		conditions.MarkTrue(tj, trainingv1alpha1.ConditionCheckpointReady, ReasonClaimReady, o.claim.message)
	default:
		conditions.MarkFalse(tj, trainingv1alpha1.ConditionCheckpointReady, o.claim.reason, o.claim.message)
	}
}

func markStores(tj *trainingv1alpha1.TrainingJob, o observation) {
	switch {
	case o.stores == nil:
	case o.stores.AllReady():
		conditions.MarkTrue(tj, trainingv1alpha1.ConditionFeatureStoresReady, commonv1alpha1.ReasonReconciled, o.stores.Message())
	default:
		conditions.MarkFalse(tj, trainingv1alpha1.ConditionFeatureStoresReady, o.stores.Reason(), o.stores.Message())
	}
}

// markCreated records the run's child and closes a restart.
func markCreated(tj *trainingv1alpha1.TrainingJob, o observation) {
	if o.ref != nil {
		ref := *o.ref
		tj.Status.Job = &ref
	}
	tj.Status.Roles = o.job.Roles
	// Derived from the spec rather than remembered from the reconcile that
	// checked the claim, so a reconcile from a lagging cache writes the same.
	tj.Status.CheckpointClaim = backend.CheckpointClaimName(tj)
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionCreated, ReasonJobCreated, fmt.Sprintf("%s %s created", o.kind, o.jobName))
	if conditions.Get(tj, trainingv1alpha1.ConditionRestarting) != nil {
		// Only jobs that restarted carry the condition; it stays, False,
		// as the record of the latest restart.
		conditions.MarkFalse(tj, trainingv1alpha1.ConditionRestarting, ReasonRunStarted, fmt.Sprintf("Run %d started (restart %d)", o.run, tj.Status.RestartCount))
		tj.Status.NextRunTime = nil
	}
	if o.localQueue == "" {
		// Taken out of its queue while it waited.
		conditions.Remove(tj, trainingv1alpha1.ConditionQueued)
	}
}

// suspendedWithoutJob: a queued job is suspended by having no child.
func suspendedWithoutJob(tj *trainingv1alpha1.TrainingJob, _ observation) bool {
	if !suspendedWithoutChild(tj) {
		return false
	}
	markSuspended(tj, "The job is suspended; its run ended and the next one starts when suspend is false")
	return true
}

// waiting says that the job waits without a child, in Reconciling or
// Stalled. Ready is for long-running kinds; kstatus reads Reconciling and
// Stalled, and people read Succeeded, Failed and Finished.
func waiting(tj *trainingv1alpha1.TrainingJob, stalled bool, reason, message string) bool {
	if stalled {
		conditions.MarkStalled(tj, reason, message)
	} else {
		conditions.MarkReconciling(tj, reason, message)
	}
	conditions.Remove(tj, commonv1alpha1.ConditionReady)
	return true
}

func stalledWithoutJob(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	return o.invalid != nil && waiting(tj, true, o.invalidReason, o.invalid.Error())
}

func claimStalled(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	return o.claim != nil && o.claim.stalled && waiting(tj, true, o.claim.reason, o.claim.message)
}

func claimWaiting(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	return o.claim != nil && !o.claim.ready && waiting(tj, false, o.claim.reason, "Waiting for the checkpoint claim before starting: "+o.claim.message)
}

func backingOff(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if !conditions.IsTrue(tj, trainingv1alpha1.ConditionRestarting) {
		return false
	}
	c := *conditions.Get(tj, trainingv1alpha1.ConditionRestarting)
	// Set again only to stamp this generation.
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionRestarting, c.Reason, c.Message)
	tj.Status.Phase = trainingv1alpha1.PhaseRestarting
	msg := c.Message
	if len(o.waitsFor) > 0 {
		// Past its start time, the next run waits for the previous one's
		// pods, so the two never write the same checkpoint.
		msg = fmt.Sprintf("Run %d waits for the pods of run %d to end: %s", o.run, o.run-1, podList(o.waitsFor))
	}
	return waiting(tj, false, ReasonRestarting, msg)
}

// podList names the first few pods of a list and counts the rest.
func podList(names []string) string {
	const shown = 3
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

func storesWaiting(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	return o.stores != nil && !o.stores.AllReady() && waiting(tj, false, o.stores.Reason(), "Waiting for FeatureStores before starting: "+o.stores.Message())
}

func creating(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	return waiting(tj, false, commonv1alpha1.ReasonProgressing, fmt.Sprintf("Creating %s %s", o.kind, o.jobName))
}

func succeeded(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	t := o.job.Succeeded
	if t == nil {
		return false
	}
	finish(tj, o, t)
	msg := orDefault(t.Message, fmt.Sprintf("%s %s succeeded", o.kind, o.jobName))
	conditions.MarkSucceeded(tj, ReasonSucceeded, msg)
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionFinished, ReasonSucceeded, msg)
	tj.Status.Phase = trainingv1alpha1.PhaseSucceeded
	appendRun(tj, trainingv1alpha1.RunRecord{Run: o.run, Reason: ReasonSucceeded, StartTime: o.runStart, EndTime: tj.Status.CompletionTime})
	return true
}

// failed records a failure that is not restarted. A failed job is also
// Stalled, which is what kstatus reads as Failed.
func failed(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	t := o.job.Failed
	if t == nil {
		return false
	}
	finish(tj, o, t)
	tj.Status.Failure = explainFailure(tj, *o.job, o.pods)
	msg := failureMessage(tj.Status.Failure)
	if o.decision != nil && tj.Spec.Checkpoint != nil {
		msg += "; not restarted: " + o.decision.Message
	}
	conditions.MarkFailed(tj, ReasonFailed, msg)
	conditions.MarkTrue(tj, commonv1alpha1.ConditionStalled, ReasonFailed, msg)
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionFinished, ReasonFailed, msg)
	tj.Status.Phase = trainingv1alpha1.PhaseFailed
	f := tj.Status.Failure
	appendRun(tj, trainingv1alpha1.RunRecord{Run: o.run, Reason: orDefault(f.Cause, ReasonFailed), Class: f.Class, Message: msg, StartTime: o.runStart, EndTime: tj.Status.CompletionTime})
	return true
}

// waitingInQueue: Kueue has not admitted the child yet, or evicted it.
// Waiting in a queue is neither a failure nor a restart.
func waitingInQueue(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if o.localQueue == "" || !o.job.SpecSuspended || tj.Spec.Suspend {
		return false
	}
	queue := queueDescription(o)
	reason, msg := ReasonWaiting, fmt.Sprintf("%s %s waits for Kueue to admit it from %s", o.kind, o.jobName, queue)
	if c := conditions.Get(tj, trainingv1alpha1.ConditionQueued); c != nil && (c.Reason == ReasonAdmitted || c.Reason == ReasonEvicted) {
		reason, msg = ReasonEvicted, fmt.Sprintf("Kueue evicted %s %s; it waits to be admitted again from %s", o.kind, o.jobName, queue)
	}
	tj.Status.Queue = &commonv1alpha1.QueueStatus{LocalQueue: o.localQueue}
	if q := o.queue; q != nil {
		switch {
		case q.position != nil:
			tj.Status.Queue.Position = q.position
			msg += fmt.Sprintf("; position %d in LocalQueue %s", *q.position, o.localQueue)
		case q.unknown != "":
			msg += "; " + q.unknown
		}
		if q.message != "" {
			msg += ". Kueue: " + q.message
		}
	}
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionQueued, reason, msg)
	markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
	markInProgress(tj, ReasonQueued, msg)
	if q := o.queue; q != nil && q.noWorkload != "" {
		// Waiting for an admission that cannot come needs a person.
		conditions.MarkStalled(tj, ReasonNoWorkload, q.noWorkload)
	}
	if q := o.queue; q != nil && q.deactivated != "" {
		// So does a Workload deactivated; activated again, it waits on.
		conditions.MarkStalled(tj, ReasonWorkloadDeactivated, q.deactivated)
	}
	tj.Status.Phase = trainingv1alpha1.PhaseQueued
	return true
}

// queueDescription names the LocalQueue of the run's child, and says so
// when Kueue chose it.
func queueDescription(o observation) string {
	if o.byDefault {
		return fmt.Sprintf("LocalQueue %s, Kueue's default for the namespace (the TrainingJob names no queueName)", o.localQueue)
	}
	return "queue " + o.localQueue
}

// finishedByKueue: Kueue declared the child's Workload finished while the
// child never ran as admitted, so nothing will ever admit it: the job
// fails with Kueue's words.
func finishedByKueue(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if o.queue == nil || o.queue.finished == "" {
		return false
	}
	failedByKueue(tj, o, ReasonWorkloadFinished, o.queue.finished)
	return true
}

// deletedByKueue: Kueue deleted the child after deactivating its
// Workload; the job fails with the deactivation's reason.
func deletedByKueue(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if o.deletedByKueue == "" {
		return false
	}
	failedByKueue(tj, o, ReasonWorkloadDeactivated, o.deletedByKueue)
	return true
}

// failedByKueue records the end of a job whose run Kueue gave up on, which
// its child cannot report: it never ran as admitted.
func failedByKueue(tj *trainingv1alpha1.TrainingJob, o observation, reason, message string) {
	finish(tj, o, &backend.Transition{})
	conditions.MarkFailed(tj, reason, message)
	conditions.MarkTrue(tj, commonv1alpha1.ConditionStalled, reason, message)
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionFinished, reason, message)
	conditions.Remove(tj, trainingv1alpha1.ConditionQueued)
	tj.Status.Phase = trainingv1alpha1.PhaseFailed
	appendRun(tj, trainingv1alpha1.RunRecord{Run: o.run, Reason: reason, Message: message, StartTime: o.runStart, EndTime: tj.Status.CompletionTime})
}

// admittedPending: admitted; the child may still report itself suspended
// until its pods exist.
func admittedPending(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if o.localQueue == "" || o.job.Restarting != nil || o.job.Running != nil {
		return false
	}
	markAdmitted(tj, o)
	markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
	markInProgress(tj, ReasonPodsPending, "Waiting for the pods to run")
	return true
}

func suspended(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if o.job.Suspended == nil || !tj.Spec.Suspend {
		return false
	}
	markSuspended(tj, "The job is suspended; its pods are deleted")
	return true
}

func suspending(tj *trainingv1alpha1.TrainingJob, _ observation) bool {
	if !tj.Spec.Suspend {
		return false
	}
	markSuspendedFalse(tj, ReasonSuspending, "Suspending the job")
	markInProgress(tj, ReasonSuspending, "Waiting for the job's pods to stop")
	return true
}

func resuming(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if o.job.Suspended == nil && !o.job.SpecSuspended {
		return false
	}
	markSuspendedFalse(tj, ReasonResuming, "Resuming the job")
	markInProgress(tj, ReasonResuming, "Waiting for the job to resume")
	return true
}

func restartingPods(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	if o.job.Restarting == nil {
		return false
	}
	if o.localQueue != "" {
		markAdmitted(tj, o)
	}
	markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
	markInProgress(tj, ReasonRestarting, orDefault(o.job.Restarting.Message, "Pods are restarting"))
	return true
}

func running(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	t := o.job.Running
	if t == nil {
		return false
	}
	if o.localQueue != "" {
		markAdmitted(tj, o)
	}
	markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
	start := o.runStart
	if start == nil {
		start = timeOr(t.Time, o.now)
	}
	if tj.Status.StartTime == nil {
		tj.Status.StartTime = start.DeepCopy()
	}
	if tj.Status.DeadlineStartTime == nil {
		// The first run, the first after a queued job's resume, or a job
		// whose status predates the field (deadlineStart).
		tj.Status.DeadlineStartTime = deadlineStart(tj, start).DeepCopy()
	}
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionRunning, ReasonRunning, orDefault(t.Message, fmt.Sprintf("%s %s is running", o.kind, o.jobName)))
	conditions.Remove(tj, commonv1alpha1.ConditionReconciling)
	conditions.Remove(tj, commonv1alpha1.ConditionStalled)
	tj.Status.Phase = trainingv1alpha1.PhaseRunning
	return true
}

// stillRunning keeps a run that was seen running Running while its ranks
// end one by one, or one of them is briefly not ready: the run is over only
// when the child decides (succeeded or failed, the rules before), and each
// rank's end would otherwise cost a status write that says nothing. A
// suspension or a new run marks Running False first, so a True condition
// here is the current run's.
func stillRunning(tj *trainingv1alpha1.TrainingJob, o observation) bool {
	c := conditions.Get(tj, trainingv1alpha1.ConditionRunning)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	st := *o.job
	st.Running = &backend.Transition{Reason: c.Reason, Message: c.Message, Time: c.LastTransitionTime}
	o.job = &st
	return running(tj, o)
}

func podsPending(tj *trainingv1alpha1.TrainingJob, _ observation) bool {
	markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
	markInProgress(tj, ReasonPodsPending, "Waiting for the pods to run")
	return true
}

// restartDeadline starts the job's deadline anew when the run's child comes
// back from a pause that restarts the child's own deadline, whose
// controller resets its startTime then: the user resumed a job suspended in
// place, or Kueue readmitted a job it had evicted. As for a Kubernetes Job,
// the time before the pause no longer counts. It runs before the status
// rules, which then record the resume (Suspended False) or the admission
// (Queued False), so it acts once per pause. A queued job's suspension
// ends its run instead (endRun), and the next run's start sets the deadline
// (running).
func restartDeadline(tj *trainingv1alpha1.TrainingJob, o observation) {
	if tj.Status.DeadlineStartTime == nil || o.job == nil {
		return
	}
	resumed := tj.Spec.QueueName == "" && !tj.Spec.Suspend && conditions.IsTrue(tj, commonv1alpha1.ConditionSuspended)
	q := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
	readmitted := q != nil && q.Reason == ReasonEvicted && !o.job.SpecSuspended
	if resumed || readmitted {
		tj.Status.DeadlineStartTime = &metav1.Time{Time: o.now.Truncate(time.Second)}
	}
}

// markSuspended says the job is suspended by the user.
func markSuspended(tj *trainingv1alpha1.TrainingJob, message string) {
	conditions.MarkTrue(tj, commonv1alpha1.ConditionSuspended, ReasonSuspended, message)
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionRunning, ReasonSuspended, "The job is suspended")
	conditions.Remove(tj, commonv1alpha1.ConditionReconciling)
	conditions.Remove(tj, commonv1alpha1.ConditionStalled)
	tj.Status.Phase = trainingv1alpha1.PhaseSuspended
}

// markAdmitted records Kueue's admission of the current run.
func markAdmitted(tj *trainingv1alpha1.TrainingJob, o observation) {
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionQueued, ReasonAdmitted, fmt.Sprintf("Kueue admitted %s %s from %s", o.kind, o.jobName, queueDescription(o)))
}

// endRun records the end of the current run and moves status to the next
// one: this write is the durable decision that the next reconcile acts on
// (the previous run's child is retired, the next one created once
// nextRunTime has passed).
func endRun(tj *trainingv1alpha1.TrainingJob, o observation) {
	e := o.end
	appendRun(tj, e.record)
	tj.Status.Run = e.next
	tj.Status.Roles = nil
	conditions.Remove(tj, trainingv1alpha1.ConditionQueued)
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionCreated, ReasonJobNotCreated, fmt.Sprintf("Run %d has no %s yet", e.next, orDefault(o.kind, "job")))
	if !e.restart {
		// The deadline starts anew when the next run starts (running).
		tj.Status.DeadlineStartTime = nil
		markSuspended(tj, e.message)
		return
	}
	tj.Status.RestartCount++
	tj.Status.NextRunTime = e.nextRunTime
	conditions.MarkTrue(tj, trainingv1alpha1.ConditionRestarting, e.record.Reason, e.message)
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionRunning, ReasonRestarting, e.message)
	conditions.MarkTrue(tj, commonv1alpha1.ConditionReconciling, ReasonRestarting, e.message)
	conditions.Remove(tj, commonv1alpha1.ConditionStalled)
	tj.Status.Phase = trainingv1alpha1.PhaseRestarting
}

// appendRun adds an ended run to the history, keeping the newest.
func appendRun(tj *trainingv1alpha1.TrainingJob, r trainingv1alpha1.RunRecord) {
	tj.Status.Runs = append(tj.Status.Runs, r)
	if n := len(tj.Status.Runs); n > maxRunHistory {
		tj.Status.Runs = tj.Status.Runs[n-maxRunHistory:]
	}
}

// markInProgress says the job is on its way to running.
func markInProgress(tj *trainingv1alpha1.TrainingJob, reason, message string) {
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionRunning, reason, message)
	conditions.MarkTrue(tj, commonv1alpha1.ConditionReconciling, reason, message)
	conditions.Remove(tj, commonv1alpha1.ConditionStalled)
	tj.Status.Phase = trainingv1alpha1.PhasePending
}

func markSuspendedFalse(tj *trainingv1alpha1.TrainingJob, reason, message string) {
	conditions.MarkFalse(tj, commonv1alpha1.ConditionSuspended, reason, message)
}

// finish records the end of the run: the completion time the child itself
// recorded (so the TTL counts from the real end, not from when the
// operator noticed), the duration, and Running and Suspended closed.
func finish(tj *trainingv1alpha1.TrainingJob, o observation, terminal *backend.Transition) {
	end := timeOr(terminal.Time, o.now)
	tj.Status.CompletionTime = end
	start := tj.Status.StartTime
	if start == nil {
		start = &tj.CreationTimestamp
	}
	if d := end.Sub(start.Time); d >= 0 {
		tj.Status.Duration = d.Round(time.Second).String()
	}
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionRunning, ReasonFinished, "The job finished")
	conditions.MarkFalse(tj, commonv1alpha1.ConditionSuspended, ReasonFinished, "The job finished")
}

// explainFailure combines the child's reason with what the run says: the
// failure's class and cause, and the failed container's termination
// message (see package failure and classifyRun).
func explainFailure(tj *trainingv1alpha1.TrainingJob, st backend.RunState, pods []corev1.Pod) *trainingv1alpha1.Failure {
	r, failed := classifyRun(tj, st, pods), st.Failed
	return &trainingv1alpha1.Failure{
		Reason: failed.Reason, Message: failed.Message,
		Class: r.Class, Cause: r.Cause, MemoryLimit: r.MemoryLimit,
		Pod: r.Pod, Container: r.Container, ExitCode: r.ExitCode,
		TerminationMessage: truncate(r.TerminationMessage, maxTerminationMessage),
	}
}

// classifyRun explains a failed run: by its deadline when its child's
// controller says the run outlived runPolicy.activeDeadlineSeconds, else
// by what its pods say.
func classifyRun(tj *trainingv1alpha1.TrainingJob, st backend.RunState, pods []corev1.Pod) failure.Result {
	if st.DeadlineExceeded {
		return failure.DeadlineExceeded(tj.Spec.RunPolicy.ActiveDeadlineSeconds)
	}
	return failure.Classify(pods)
}

func failureMessage(f *trainingv1alpha1.Failure) string {
	msg := orDefault(f.Message, "The run's job failed")
	switch {
	case f.Cause == failure.CauseDeadlineExceeded:
		return msg + " (runPolicy.activeDeadlineSeconds)"
	case f.Cause == failure.CauseOOMKilled && f.MemoryLimit != "":
		msg = fmt.Sprintf("%s; container %s of pod %s was OOMKilled (memory limit %s)", msg, f.Container, f.Pod, f.MemoryLimit)
	case f.Cause == failure.CauseOOMKilled:
		msg = fmt.Sprintf("%s; container %s of pod %s was OOMKilled", msg, f.Container, f.Pod)
	case f.Class == trainingv1alpha1.FailureClassInfrastructure:
		return fmt.Sprintf("%s; infrastructure failure (%s) of pod %s", msg, f.Cause, f.Pod)
	case f.Container == "":
		return msg
	default:
		msg = fmt.Sprintf("%s; container %s of pod %s exited with code %d", msg, f.Container, f.Pod, f.ExitCode)
	}
	if f.TerminationMessage != "" {
		msg += ": " + lastLine(f.TerminationMessage)
	}
	return msg
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Keep the end: the last lines of a log explain a crash.
	return s[len(s)-n:]
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func timeOr(t metav1.Time, now time.Time) *metav1.Time {
	if t.IsZero() {
		return &metav1.Time{Time: now.Truncate(time.Second)}
	}
	return &metav1.Time{Time: t.Time}
}
