package trainingjob

import (
	"fmt"
	"slices"
	"strings"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
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
	ReasonJobCreated        = "JobCreated"
	ReasonJobNotCreated     = "JobNotCreated"
	ReasonPodsPending       = "PodsPending"
	ReasonRunning           = "Running"
	ReasonRestarting        = "Restarting"
	ReasonSuspending        = "Suspending"
	ReasonSuspended         = "Suspended"
	ReasonNotSuspended      = "NotSuspended"
	ReasonResuming          = "Resuming"
	ReasonSucceeded         = "Succeeded"
	ReasonFailed            = "Failed"
	ReasonFinished          = "Finished"
	ReasonFrameworkNotReady = "FrameworkUnavailable"
	// Queue reasons: waiting for Kueue's first admission, waiting again
	// after Kueue evicted the job, and admitted.
	ReasonQueued   = "Queued"
	ReasonWaiting  = "Waiting"
	ReasonEvicted  = "Evicted"
	ReasonAdmitted = "Admitted"
	// ReasonRunStarted closes the Restarting condition once the next run's
	// Kubeflow job exists.
	ReasonRunStarted = "RunStarted"
	// Checkpoint claim reasons.
	ReasonClaimReady        = "ClaimReady"
	ReasonClaimConflict     = "ClaimConflict"
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
	// kind and jobName name the Kubeflow job of the current run.
	kind    string
	jobName string
	run     int32
	// job is the observed Kubeflow job's status; nil when the job does not
	// exist (yet).
	job *kubeflowv1.JobStatus
	// jobSuspended is the suspend flag of the observed job's run policy.
	jobSuspended bool
	// stores is the FeatureStore resolution, nil when none was needed.
	stores *featureref.Resolution
	// invalid is why the job cannot be created until a person acts.
	invalid error
	// invalidReason is the condition reason for invalid.
	invalidReason string
	// pods are the pods of the current run, for the failure explanation.
	pods []corev1.Pod
	now  time.Time
	// claim is what was learned about the checkpoint claim; nil when it
	// was not looked at in this reconcile.
	claim *claimObservation
	// end is a run that ended in this reconcile with a decision confirmed
	// against the live object: a restart, or a queued job's suspension.
	end *runEnd
	// decision is why a failed run was not restarted, for the message.
	decision *restart.Decision
	// runStart is when the current run's Kubeflow job started, if known.
	runStart *metav1.Time
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
// the Kubeflow job may be gone since, and must not be re-read into it.
func setStatus(tj *trainingv1alpha1.TrainingJob, o observation) {
	tj.Status.ObservedGeneration = tj.Generation
	if conditions.IsFinished(tj) {
		return
	}
	if tj.Status.Run == 0 {
		tj.Status.Run = o.run
	}
	if o.claim != nil {
		if o.claim.ready {
			conditions.MarkTrue(tj, trainingv1alpha1.ConditionCheckpointReady, ReasonClaimReady, o.claim.message)
		} else {
			conditions.MarkFalse(tj, trainingv1alpha1.ConditionCheckpointReady, o.claim.reason, o.claim.message)
		}
	}
	if o.end != nil {
		endRun(tj, o)
		return
	}
	if o.stores != nil {
		if o.stores.AllReady() {
			conditions.MarkTrue(tj, trainingv1alpha1.ConditionFeatureStoresReady, commonv1alpha1.ReasonReconciled, o.stores.Message())
		} else {
			conditions.MarkFalse(tj, trainingv1alpha1.ConditionFeatureStoresReady, o.stores.Reason(), o.stores.Message())
		}
	}

	if o.job == nil {
		tj.Status.Phase = trainingv1alpha1.PhasePending
		conditions.MarkFalse(tj, trainingv1alpha1.ConditionCreated, ReasonJobNotCreated, fmt.Sprintf("%s %s does not exist yet", o.kind, o.jobName))
		restarting := conditions.IsTrue(tj, trainingv1alpha1.ConditionRestarting)
		switch {
		case tj.Spec.QueueName != "" && tj.Spec.Suspend:
			// A queued job is suspended by having no Kubeflow job.
			conditions.MarkTrue(tj, commonv1alpha1.ConditionSuspended, ReasonSuspended, "The job is suspended; its run ended and the next one starts when suspend is false")
			conditions.MarkFalse(tj, trainingv1alpha1.ConditionRunning, ReasonSuspended, "The job is suspended")
			conditions.Remove(tj, commonv1alpha1.ConditionReconciling)
			conditions.Remove(tj, commonv1alpha1.ConditionStalled)
			tj.Status.Phase = trainingv1alpha1.PhaseSuspended
		case o.invalid != nil:
			conditions.MarkStalled(tj, o.invalidReason, o.invalid.Error())
		case o.claim != nil && o.claim.stalled:
			conditions.MarkStalled(tj, o.claim.reason, o.claim.message)
		case o.claim != nil && !o.claim.ready:
			conditions.MarkReconciling(tj, o.claim.reason, "Waiting for the checkpoint claim before starting: "+o.claim.message)
		case restarting:
			c := *conditions.Get(tj, trainingv1alpha1.ConditionRestarting)
			conditions.MarkTrue(tj, trainingv1alpha1.ConditionRestarting, c.Reason, c.Message)
			conditions.MarkReconciling(tj, ReasonRestarting, c.Message)
			tj.Status.Phase = trainingv1alpha1.PhaseRestarting
		case o.stores != nil && !o.stores.AllReady():
			conditions.MarkReconciling(tj, o.stores.Reason(), "Waiting for FeatureStores before starting: "+o.stores.Message())
		default:
			conditions.MarkReconciling(tj, commonv1alpha1.ReasonProgressing, fmt.Sprintf("Creating %s %s", o.kind, o.jobName))
		}
		if tj.Spec.QueueName != "" && tj.Spec.Suspend {
			return
		}
		// Ready is for long-running kinds; kstatus reads Reconciling
		// and Stalled, and people read Succeeded and Failed.
		conditions.Remove(tj, commonv1alpha1.ConditionReady)
		return
	}

	tj.Status.Job = &trainingv1alpha1.JobReference{APIVersion: kubeflowv1.GroupVersion.String(), Kind: o.kind, Name: o.jobName}
	tj.Status.Roles = roleStatuses(o.job)
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
	queued := tj.Spec.QueueName != ""
	if !queued {
		// Taken out of its queue while it waited.
		conditions.Remove(tj, trainingv1alpha1.ConditionQueued)
	}

	succeeded := jobCondition(o.job, kubeflowv1.JobSucceeded)
	failed := jobCondition(o.job, kubeflowv1.JobFailed)
	running := jobCondition(o.job, kubeflowv1.JobRunning)
	restarting := jobCondition(o.job, kubeflowv1.JobRestarting)
	suspended := jobCondition(o.job, kubeflowv1.JobSuspended)

	switch {
	case succeeded != nil:
		finish(tj, o, succeeded)
		conditions.MarkSucceeded(tj, ReasonSucceeded, orDefault(succeeded.Message, fmt.Sprintf("%s %s succeeded", o.kind, o.jobName)))
		tj.Status.Phase = trainingv1alpha1.PhaseSucceeded
		appendRun(tj, trainingv1alpha1.RunRecord{Run: o.run, Reason: ReasonSucceeded, StartTime: o.runStart, EndTime: tj.Status.CompletionTime})
	case failed != nil:
		finish(tj, o, failed)
		tj.Status.Failure = explainFailure(failed, o.pods)
		msg := failureMessage(tj.Status.Failure)
		if o.decision != nil && tj.Spec.Checkpoint != nil {
			msg += "; not restarted: " + o.decision.Message
		}
		conditions.MarkFailed(tj, ReasonFailed, msg)
		tj.Status.Phase = trainingv1alpha1.PhaseFailed
		f := tj.Status.Failure
		appendRun(tj, trainingv1alpha1.RunRecord{Run: o.run, Reason: orDefault(f.Cause, ReasonFailed), Class: f.Class, Message: msg, StartTime: o.runStart, EndTime: tj.Status.CompletionTime})
	case queued && o.jobSuspended && !tj.Spec.Suspend:
		// Kueue has not admitted the job yet, or evicted it. Waiting in a
		// queue is neither a failure nor a restart.
		reason, msg := ReasonWaiting, fmt.Sprintf("%s %s waits for Kueue to admit it from queue %s", o.kind, o.jobName, tj.Spec.QueueName)
		if c := conditions.Get(tj, trainingv1alpha1.ConditionQueued); c != nil && (c.Reason == ReasonAdmitted || c.Reason == ReasonEvicted) {
			reason, msg = ReasonEvicted, fmt.Sprintf("Kueue evicted %s %s; it waits to be admitted again from queue %s", o.kind, o.jobName, tj.Spec.QueueName)
		}
		conditions.MarkTrue(tj, trainingv1alpha1.ConditionQueued, reason, msg)
		markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
		markInProgress(tj, ReasonQueued, msg)
		tj.Status.Phase = trainingv1alpha1.PhaseQueued
	case queued && restarting == nil && running == nil:
		// Admitted; Kubeflow may still report the job suspended until it
		// created the pods.
		markAdmitted(tj, o)
		markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
		markInProgress(tj, ReasonPodsPending, "Waiting for the pods to run")
	case suspended != nil && tj.Spec.Suspend:
		conditions.MarkTrue(tj, commonv1alpha1.ConditionSuspended, ReasonSuspended, "The job is suspended; its pods are deleted")
		conditions.MarkFalse(tj, trainingv1alpha1.ConditionRunning, ReasonSuspended, "The job is suspended")
		conditions.Remove(tj, commonv1alpha1.ConditionReconciling)
		conditions.Remove(tj, commonv1alpha1.ConditionStalled)
		tj.Status.Phase = trainingv1alpha1.PhaseSuspended
	case tj.Spec.Suspend:
		markSuspendedFalse(tj, ReasonSuspending, "Suspending the job")
		markInProgress(tj, ReasonSuspending, "Waiting for the Kubeflow job to suspend")
	case suspended != nil || o.jobSuspended:
		markSuspendedFalse(tj, ReasonResuming, "Resuming the job")
		markInProgress(tj, ReasonResuming, "Waiting for the Kubeflow job to resume")
	case restarting != nil:
		if queued {
			markAdmitted(tj, o)
		}
		markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
		markInProgress(tj, ReasonRestarting, orDefault(restarting.Message, "Pods are restarting"))
	case running != nil:
		if queued {
			markAdmitted(tj, o)
		}
		markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
		if tj.Status.StartTime == nil {
			tj.Status.StartTime = timeOr(running.LastTransitionTime, o.now)
		}
		conditions.MarkTrue(tj, trainingv1alpha1.ConditionRunning, ReasonRunning, orDefault(running.Message, fmt.Sprintf("%s %s is running", o.kind, o.jobName)))
		conditions.Remove(tj, commonv1alpha1.ConditionReconciling)
		conditions.Remove(tj, commonv1alpha1.ConditionStalled)
		tj.Status.Phase = trainingv1alpha1.PhaseRunning
	default:
		markSuspendedFalse(tj, ReasonNotSuspended, "The job is not suspended")
		markInProgress(tj, ReasonPodsPending, "Waiting for the pods to run")
	}
}

// markAdmitted records Kueue's admission of the current run.
func markAdmitted(tj *trainingv1alpha1.TrainingJob, o observation) {
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionQueued, ReasonAdmitted, fmt.Sprintf("Kueue admitted %s %s from queue %s", o.kind, o.jobName, tj.Spec.QueueName))
}

// endRun records the end of the current run and moves status to the next
// one: this write is the durable decision that the next reconcile acts on
// (the previous run's job is retired, the next one created once
// nextRunTime has passed).
func endRun(tj *trainingv1alpha1.TrainingJob, o observation) {
	e := o.end
	appendRun(tj, e.record)
	tj.Status.Run = e.next
	tj.Status.Roles = nil
	conditions.Remove(tj, trainingv1alpha1.ConditionQueued)
	conditions.MarkFalse(tj, trainingv1alpha1.ConditionCreated, ReasonJobNotCreated, fmt.Sprintf("Run %d has no Kubeflow job yet", e.next))
	if !e.restart {
		conditions.MarkTrue(tj, commonv1alpha1.ConditionSuspended, ReasonSuspended, e.message)
		conditions.MarkFalse(tj, trainingv1alpha1.ConditionRunning, ReasonSuspended, "The job is suspended")
		conditions.Remove(tj, commonv1alpha1.ConditionReconciling)
		conditions.Remove(tj, commonv1alpha1.ConditionStalled)
		tj.Status.Phase = trainingv1alpha1.PhaseSuspended
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

// finish records the end of the run: completion time, duration, and the
// Running and Suspended conditions closed.
func finish(tj *trainingv1alpha1.TrainingJob, o observation, terminal *kubeflowv1.JobCondition) {
	end := o.job.CompletionTime
	if end == nil {
		end = timeOr(terminal.LastTransitionTime, o.now)
	}
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

// jobCondition returns the Kubeflow job's condition of the given type when
// it is True.
func jobCondition(s *kubeflowv1.JobStatus, t kubeflowv1.JobConditionType) *kubeflowv1.JobCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t && s.Conditions[i].Status == corev1.ConditionTrue {
			return &s.Conditions[i]
		}
	}
	return nil
}

func roleStatuses(s *kubeflowv1.JobStatus) []trainingv1alpha1.RoleStatus {
	if len(s.ReplicaStatuses) == 0 {
		return nil
	}
	out := make([]trainingv1alpha1.RoleStatus, 0, len(s.ReplicaStatuses))
	for role, rs := range s.ReplicaStatuses {
		if rs == nil {
			continue
		}
		out = append(out, trainingv1alpha1.RoleStatus{Name: string(role), Active: rs.Active, Succeeded: rs.Succeeded, Failed: rs.Failed})
	}
	slices.SortFunc(out, func(a, b trainingv1alpha1.RoleStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// explainFailure combines Kubeflow's reason with what the pods say:
// the failure's class and cause, and the failed container's termination
// message (see package failure).
func explainFailure(failed *kubeflowv1.JobCondition, pods []corev1.Pod) *trainingv1alpha1.Failure {
	r := failure.Classify(pods)
	return &trainingv1alpha1.Failure{
		Reason: failed.Reason, Message: failed.Message,
		Class: r.Class, Cause: r.Cause, MemoryLimit: r.MemoryLimit,
		Pod: r.Pod, Container: r.Container, ExitCode: r.ExitCode,
		TerminationMessage: truncate(r.TerminationMessage, maxTerminationMessage),
	}
}

func failureMessage(f *trainingv1alpha1.Failure) string {
	msg := orDefault(f.Message, "The Kubeflow job failed")
	switch {
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

// event is a Kubernetes event to emit once the status write succeeded.
type event struct {
	Type, Reason, Message string
}

// transitionEvents returns an event for each transition people act on
// between the persisted status and the new one.
func transitionEvents(before, after []metav1.Condition) []event {
	var out []event
	became := func(t string, s metav1.ConditionStatus) *metav1.Condition {
		b, a := find(before, t), find(after, t)
		if a == nil || a.Status != s || (b != nil && b.Status == s) {
			return nil
		}
		return a
	}
	if c := became(trainingv1alpha1.ConditionFeatureStoresReady, metav1.ConditionFalse); c != nil {
		out = append(out, event{corev1.EventTypeWarning, "WaitingForFeatureStores", c.Message})
	}
	if c := became(commonv1alpha1.ConditionStalled, metav1.ConditionTrue); c != nil {
		out = append(out, event{corev1.EventTypeWarning, c.Reason, c.Message})
	}
	if c := became(trainingv1alpha1.ConditionCheckpointReady, metav1.ConditionFalse); c != nil {
		out = append(out, event{corev1.EventTypeWarning, "WaitingForCheckpointClaim", c.Message})
	}
	if c := became(trainingv1alpha1.ConditionRestarting, metav1.ConditionTrue); c != nil {
		out = append(out, event{corev1.EventTypeWarning, "Restarting", c.Message})
	}
	if c := became(trainingv1alpha1.ConditionQueued, metav1.ConditionTrue); c != nil {
		if c.Reason == ReasonEvicted {
			out = append(out, event{corev1.EventTypeWarning, "Evicted", c.Message})
		} else {
			out = append(out, event{corev1.EventTypeNormal, "Queued", c.Message})
		}
	}
	if c := became(trainingv1alpha1.ConditionQueued, metav1.ConditionFalse); c != nil && c.Reason == ReasonAdmitted {
		out = append(out, event{corev1.EventTypeNormal, "Admitted", c.Message})
	}
	if c := became(trainingv1alpha1.ConditionCreated, metav1.ConditionTrue); c != nil {
		out = append(out, event{corev1.EventTypeNormal, "Created", c.Message})
	}
	if c := became(commonv1alpha1.ConditionSuspended, metav1.ConditionTrue); c != nil {
		out = append(out, event{corev1.EventTypeNormal, "Suspended", c.Message})
	}
	if b := find(before, commonv1alpha1.ConditionSuspended); b != nil && b.Status == metav1.ConditionTrue {
		if a := find(after, commonv1alpha1.ConditionSuspended); a != nil && a.Status == metav1.ConditionFalse {
			out = append(out, event{corev1.EventTypeNormal, "Resumed", "The job was resumed"})
		}
	}
	// Running gets no event of its own: the condition shows it, and the
	// Kubeflow job records its own JobRunning event. Leaving it out keeps a
	// whole lifecycle within six writes (child create, three status
	// patches, Created and Succeeded events), which matters when hundreds of
	// jobs start at once, while every event people act on stays.
	if c := became(commonv1alpha1.ConditionSucceeded, metav1.ConditionTrue); c != nil {
		out = append(out, event{corev1.EventTypeNormal, "Succeeded", c.Message})
	}
	if c := became(commonv1alpha1.ConditionFailed, metav1.ConditionTrue); c != nil {
		out = append(out, event{corev1.EventTypeWarning, "Failed", c.Message})
	}
	return out
}

func find(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// podIssue is a pod problem worth repeating on the TrainingJob, so that
// `kubectl describe trainingjob` explains a job that does not start or
// keeps failing.
type podIssue struct {
	// key identifies the occurrence, so it is reported once.
	key string
	event
}

// waitingReasons are the container waiting reasons that need a person:
// the image cannot be pulled or the container cannot be configured.
var waitingReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff"}

// podIssues lists the problems of pods: unschedulable, image pull and
// configuration failures, and containers killed for running out of memory.
func podIssues(pods []corev1.Pod) []podIssue {
	var out []podIssue
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				out = append(out, podIssue{
					key:   fmt.Sprintf("%s/Unschedulable", p.UID),
					event: event{corev1.EventTypeWarning, "PodUnschedulable", fmt.Sprintf("Pod %s cannot be scheduled: %s", p.Name, c.Message)},
				})
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && slices.Contains(waitingReasons, w.Reason) {
				out = append(out, podIssue{
					key:   fmt.Sprintf("%s/%s/%s/%d", p.UID, cs.Name, w.Reason, cs.RestartCount),
					event: event{corev1.EventTypeWarning, "Pod" + w.Reason, fmt.Sprintf("Pod %s container %s: %s %s", p.Name, cs.Name, w.Reason, w.Message)},
				})
			}
			for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if t != nil && t.Reason == "OOMKilled" {
					out = append(out, podIssue{
						key:   fmt.Sprintf("%s/%s/OOMKilled/%s", p.UID, cs.Name, t.FinishedAt.UTC().Format(time.RFC3339)),
						event: event{corev1.EventTypeWarning, "PodOOMKilled", fmt.Sprintf("Pod %s container %s was killed for exceeding its memory limit", p.Name, cs.Name)},
					})
				}
			}
		}
	}
	return out
}
