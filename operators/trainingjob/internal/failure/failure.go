package failure

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// Causes, each one CamelCase word; they end up in status and in the
// restarted_total metric.
const (
	CausePreempted       = "Preempted"
	CauseDrained         = "Drained"
	CauseNodeTainted     = "NodeTainted"
	CauseNodeLost        = "NodeLost"
	CauseNodeShutdown    = "NodeShutdown"
	CauseEvicted         = "Evicted"
	CauseDisrupted       = "Disrupted"
	CausePodDeleted      = "PodDeleted"
	CauseOOMKilled       = "OOMKilled"
	CauseImagePullFailed = "ImagePullFailed"
	CauseConfigError     = "ConfigError"
	CauseKilled          = "Killed"
	CauseError           = "Error"
	// CauseDeadlineExceeded: the run was active longer than the job's
	// runPolicy.activeDeadlineSeconds.
	CauseDeadlineExceeded = "DeadlineExceeded"
	CauseUnknown          = "Unknown"
)

// DisruptionTarget reasons that k8s.io/api does not export as constants;
// the values are those the control plane components set.
const (
	reasonEvictionByEvictionAPI  = "EvictionByEvictionAPI"
	reasonDeletionByTaintManager = "DeletionByTaintManager"
	reasonDeletionByPodGC        = "DeletionByPodGC"
)

// Result explains a failed run.
type Result struct {
	Class   trainingv1alpha1.FailureClass
	Cause   string
	Message string
	// Pod and Container that failed, when one did.
	Pod       string
	Container string
	ExitCode  int32
	// TerminationMessage of the failed container: what it wrote to
	// /dev/termination-log, else the tail of its log.
	TerminationMessage string
	// MemoryLimit of an OOMKilled container.
	MemoryLimit string
}

// Retryable reports whether a new run may succeed where this one failed.
func (r Result) Retryable() bool { return r.Class == trainingv1alpha1.FailureClassInfrastructure }

// policy looks at every pod for one kind of evidence.
type policy func(pods []corev1.Pod) (Result, bool)

// policies are asked in order; the first with evidence decides. Errors that
// would certainly repeat come first: a container that ran out of memory, or
// whose image or configuration is broken, fails again however often the
// job runs. Infrastructure evidence comes next and beats plain non-zero
// exits, because when one pod is preempted or its node goes away, its
// peers typically crash with communication errors (NCCL, gloo) as a
// consequence.
var policies = []policy{
	oomKilled,
	brokenImageOrConfig,
	disrupted,
	podReason,
	deleted,
	exitedWithError,
}

// Classify explains why a run failed from its pods. Pods are examined in
// name order, so the explanation is stable between reconciles.
func Classify(pods []corev1.Pod) Result {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range policies {
		if r, ok := p(sorted); ok {
			return r
		}
	}
	return Result{Class: trainingv1alpha1.FailureClassUnknown, Cause: CauseUnknown, Message: "The pods do not explain the failure"}
}

// DeadlineExceeded explains a run that its child's controller ended once
// it had been active longer than runPolicy.activeDeadlineSeconds. The
// controller deletes the running pods itself, so the pods are not read:
// they would look deleted, an infrastructure failure. The job used the time
// its user gave it, which a new run does not give back.
func DeadlineExceeded(seconds *int64) Result {
	msg := "The run was active longer than runPolicy.activeDeadlineSeconds"
	if seconds != nil {
		msg = fmt.Sprintf("%s (%ds)", msg, *seconds)
	}
	return user(CauseDeadlineExceeded, msg)
}

func oomKilled(pods []corev1.Pod) (Result, bool) {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			for _, t := range terminations(cs) {
				if t.Reason != "OOMKilled" {
					continue
				}
				limit := memoryLimit(&p, cs.Name)
				msg := fmt.Sprintf("Container %s of pod %s was OOMKilled", cs.Name, p.Name)
				if limit != "" {
					msg += fmt.Sprintf(": it exceeded its memory limit of %s", limit)
				}
				r := user(CauseOOMKilled, msg)
				r.Pod, r.Container, r.ExitCode, r.MemoryLimit = p.Name, cs.Name, t.ExitCode, limit
				r.TerminationMessage = orDefault(strings.TrimSpace(t.Message), t.Reason)
				return r, true
			}
		}
	}
	return Result{}, false
}

// imageReasons and configReasons are the container waiting reasons of the
// kubelet that only a change to the spec (or the registry) fixes.
var (
	imageReasons  = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
	configReasons = []string{"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)

func brokenImageOrConfig(pods []corev1.Pod) (Result, bool) {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			cause := ""
			switch {
			case slices.Contains(imageReasons, w.Reason):
				cause = CauseImagePullFailed
			case slices.Contains(configReasons, w.Reason):
				cause = CauseConfigError
			default:
				continue
			}
			r := user(cause, fmt.Sprintf("Container %s of pod %s: %s: %s", cs.Name, p.Name, w.Reason, w.Message))
			r.Pod, r.Container = p.Name, cs.Name
			return r, true
		}
	}
	return Result{}, false
}

// disrupted reads the DisruptionTarget condition that the control plane
// sets on a pod before it deletes or terminates it for reasons of its own.
func disrupted(pods []corev1.Pod) (Result, bool) {
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
				continue
			}
			var cause, what string
			switch c.Reason {
			case corev1.PodReasonPreemptionByScheduler:
				cause, what = CausePreempted, "was preempted by the scheduler for a higher-priority pod"
			case reasonEvictionByEvictionAPI:
				cause, what = CauseDrained, "was evicted through the Eviction API (a node drain)"
			case reasonDeletionByTaintManager:
				cause, what = CauseNodeTainted, "was deleted because its node got a NoExecute taint"
			case reasonDeletionByPodGC:
				cause, what = CauseNodeLost, "was deleted because its node is gone"
			case corev1.PodReasonTerminationByKubelet:
				cause, what = CauseEvicted, "was terminated by the kubelet (node pressure)"
				if nodeShutdown(&p) {
					cause, what = CauseNodeShutdown, "was terminated because its node shut down"
				}
			default:
				cause, what = CauseDisrupted, "was disrupted ("+c.Reason+")"
			}
			return infrastructure(&p, cause, fmt.Sprintf("Pod %s %s", p.Name, what), c.Message), true
		}
	}
	return Result{}, false
}

// podReason reads the reason the kubelet or the node lifecycle controller
// gives a failed pod, for pods that carry no DisruptionTarget condition.
func podReason(pods []corev1.Pod) (Result, bool) {
	for _, p := range pods {
		var cause, what string
		switch {
		case nodeShutdown(&p):
			cause, what = CauseNodeShutdown, "was terminated because its node shut down"
		case p.Status.Reason == "Evicted":
			cause, what = CauseEvicted, "was evicted by the kubelet"
		case p.Status.Reason == "NodeLost":
			cause, what = CauseNodeLost, "was lost with its node"
		case p.Status.Reason == "Preempting":
			cause, what = CausePreempted, "was preempted by the kubelet for a critical pod"
		default:
			continue
		}
		return infrastructure(&p, cause, fmt.Sprintf("Pod %s %s", p.Name, what), p.Status.Message), true
	}
	return Result{}, false
}

// deleted is a pod deleted by someone other than the control plane's
// disruption paths (those set DisruptionTarget, see disrupted): a user's
// kubectl delete, a script, a controller. It is infrastructure whatever
// state its container is in: still running or terminating (the kubelet has
// not stopped it yet), or exited with SIGTERM (143), SIGKILL (137) or the
// program's own code while it was being stopped. Deletions of the
// operator's own pods happen only after the outcome is recorded.
//
// A deletion is only the cause when it came first. The Job controller
// deletes the active pods of a Job that failed, so a pod whose container
// had already exited non-zero before the earliest deletion was requested
// (this pod's own or another's) is the failure, and exitedWithError explains
// it. The times have one-second resolution. A pod that was not deleted and
// failed in the same second as the deletion is taken as the cause: the Job
// controller deletes the peers within moments of a failure, while a peer
// that crashes on a lost connection needs the deleted pod's kubelet to stop
// it first. A deleted pod's own exit counts only when it came strictly
// before its own deletion: stopping it is what makes it exit.
func deleted(pods []corev1.Pod) (Result, bool) {
	var first *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() && (first == nil || deletionRequested(p).Before(deletionRequested(first))) {
			first = p
		}
	}
	if first == nil {
		return Result{}, false
	}
	requested := deletionRequested(first)
	for i := range pods {
		p := &pods[i]
		failedAt, ok := firstNonZeroExit(p)
		if !ok || failedAt.After(requested) {
			continue
		}
		if p.DeletionTimestamp.IsZero() || failedAt.Before(deletionRequested(p)) {
			return Result{}, false
		}
	}
	msg := fmt.Sprintf("Pod %s was deleted while it ran", first.Name)
	for _, cs := range first.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			msg += fmt.Sprintf("; container %s exited with code %d", cs.Name, t.ExitCode)
			break
		}
	}
	return infrastructure(first, CausePodDeleted, msg, ""), true
}

// deletionRequested is when the pod's deletion was asked for: the deletion
// timestamp is that moment plus the grace period.
func deletionRequested(p *corev1.Pod) time.Time {
	grace := time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second
	return p.DeletionTimestamp.Add(-grace)
}

// firstNonZeroExit is the earliest known finish of a container of p that
// exited non-zero; a termination without a finish time is not dated.
func firstNonZeroExit(p *corev1.Pod) (time.Time, bool) {
	var first time.Time
	for _, cs := range p.Status.ContainerStatuses {
		for _, t := range terminations(cs) {
			if t.ExitCode != 0 && !t.FinishedAt.IsZero() && (first.IsZero() || t.FinishedAt.Before(&metav1.Time{Time: first})) {
				first = t.FinishedAt.Time
			}
		}
	}
	return first, !first.IsZero()
}

func exitedWithError(pods []corev1.Pod) (Result, bool) {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			for _, t := range terminations(cs) {
				if t.ExitCode == 0 {
					continue
				}
				cause := CauseError
				msg := fmt.Sprintf("Container %s of pod %s exited with code %d", cs.Name, p.Name, t.ExitCode)
				if t.ExitCode == 137 {
					// SIGKILL without an OOMKilled reason and without any
					// disruption of the pod: killed by something in the
					// container or by a probe, not by the platform.
					cause = CauseKilled
					msg = fmt.Sprintf("Container %s of pod %s was killed (SIGKILL, exit code 137) without running out of memory", cs.Name, p.Name)
				}
				r := user(cause, msg)
				r.Pod, r.Container, r.ExitCode = p.Name, cs.Name, t.ExitCode
				r.TerminationMessage = orDefault(strings.TrimSpace(t.Message), t.Reason)
				return r, true
			}
		}
	}
	return Result{}, false
}

// nodeShutdown recognises the graceful node shutdown manager's pod status,
// in its current ("Terminated") and earlier ("Shutdown") wording.
func nodeShutdown(p *corev1.Pod) bool {
	switch p.Status.Reason {
	case "Shutdown", "NodeShutdown":
		return true
	case "Terminated":
		return strings.Contains(p.Status.Message, "node shutdown")
	}
	return false
}

// terminations are a container's current and previous terminated states;
// with restartPolicy OnFailure the kubelet restarts a failed container in
// place, so the failure may be in the previous one.
func terminations(cs corev1.ContainerStatus) []*corev1.ContainerStateTerminated {
	var out []*corev1.ContainerStateTerminated
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

func memoryLimit(p *corev1.Pod, container string) string {
	for _, c := range p.Spec.Containers {
		if c.Name != container {
			continue
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			return q.String()
		}
	}
	return ""
}

func user(cause, message string) Result {
	return Result{Class: trainingv1alpha1.FailureClassUser, Cause: cause, Message: message}
}

func infrastructure(p *corev1.Pod, cause, message, detail string) Result {
	if detail = strings.TrimSpace(detail); detail != "" {
		message += ": " + detail
	}
	r := Result{Class: trainingv1alpha1.FailureClassInfrastructure, Cause: cause, Message: message, Pod: p.Name}
	// The container's exit (143 for SIGTERM, 137 for SIGKILL after the
	// grace period) is recorded too, for people comparing it with logs.
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			r.Container, r.ExitCode = cs.Name, t.ExitCode
			break
		}
	}
	return r
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
