package trainingjob

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/phase"
)

// issue is a problem worth telling on the TrainingJob once, such as a pod
// problem repeated there so that `kubectl describe trainingjob` explains a
// job that does not start or keeps failing.
type issue struct {
	// key identifies the occurrence, so it is reported once.
	key string
	event
}

// waitingReasons are the container waiting reasons that need a person:
// the image cannot be pulled or the container cannot be configured.
var waitingReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff"}

// podIssues lists the problems of pods: unschedulable, image pull and
// configuration failures, and containers killed for running out of memory.
func podIssues(pods []corev1.Pod) []issue {
	var out []issue
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				// Once per run, not per pod: the ranks of a run wait for
				// the same capacity, the scheduler tells each pod's own
				// story, and an event per pod cost a write per rank
				// whenever a cluster was briefly full.
				out = append(out, issue{
					key:   fmt.Sprintf("run %s/Unschedulable", p.Labels[trainingv1alpha1.LabelRun]),
					event: ev(corev1.EventTypeWarning, "PodUnschedulable", fmt.Sprintf("Pod %s cannot be scheduled: %s", p.Name, c.Message)),
				})
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && slices.Contains(waitingReasons, w.Reason) {
				out = append(out, issue{
					key:   fmt.Sprintf("%s/%s/%s/%d", p.UID, cs.Name, w.Reason, cs.RestartCount),
					event: ev(corev1.EventTypeWarning, "Pod"+w.Reason, fmt.Sprintf("Pod %s container %s: %s %s", p.Name, cs.Name, w.Reason, w.Message)),
				})
			}
			for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if t != nil && t.Reason == "OOMKilled" {
					out = append(out, issue{
						key:   fmt.Sprintf("%s/%s/OOMKilled/%s", p.UID, cs.Name, t.FinishedAt.UTC().Format(time.RFC3339)),
						event: ev(corev1.EventTypeWarning, "PodOOMKilled", fmt.Sprintf("Pod %s container %s was killed for exceeding its memory limit", p.Name, cs.Name)),
					})
				}
			}
		}
	}
	return out
}

// podIssueEvents re-emits pod problems on the TrainingJob, each once.
func (r *Reconciler) podIssueEvents(tj *trainingv1alpha1.TrainingJob, pods []corev1.Pod) []phase.Event {
	return r.reportOnce(tj, podIssues(pods))
}

// reportOnce returns the events of the issues this process has not
// reported on the job yet. A finished job reports nothing: its pods are
// history and re-reporting them after a restart would be noise and writes.
func (r *Reconciler) reportOnce(tj *trainingv1alpha1.TrainingJob, issues []issue) []phase.Event {
	key := client.ObjectKeyFromObject(tj)
	if finished(tj) {
		r.forget(key)
		return nil
	}
	if len(issues) == 0 {
		return nil
	}
	r.reportedMu.Lock()
	defer r.reportedMu.Unlock()
	seen := r.memoryOf(tj)
	var out []phase.Event
	for _, is := range issues {
		if seen.keys[is.key] {
			continue
		}
		seen.keys[is.key] = true
		out = append(out, is.event)
	}
	return out
}

// jobMemory is what the process remembers of one TrainingJob: the
// issues it reported, and since when its current run's failure waits for
// its failed pods (awaitFailedPods).
type jobMemory struct {
	uid  types.UID
	keys map[string]bool
	// waitRun is the run whose failure began to wait at waitSince.
	waitRun   int32
	waitSince time.Time
}

// memoryOf is what the process remembers of tj, made when there is none;
// reportedMu is held.
func (r *Reconciler) memoryOf(tj *trainingv1alpha1.TrainingJob) *jobMemory {
	key := client.ObjectKeyFromObject(tj)
	if r.reported == nil {
		r.reported = map[types.NamespacedName]*jobMemory{}
	}
	seen := r.reported[key]
	if seen == nil || seen.uid != tj.UID {
		// A job of this name created anew has reported nothing.
		seen = &jobMemory{uid: tj.UID, keys: map[string]bool{}}
		r.reported[key] = seen
	}
	return seen
}

// failureWaitsSince is when this process first saw run's failure wait for
// its failed pods, now if this is the first time.
func (r *Reconciler) failureWaitsSince(tj *trainingv1alpha1.TrainingJob, run int32, now time.Time) time.Time {
	r.reportedMu.Lock()
	defer r.reportedMu.Unlock()
	m := r.memoryOf(tj)
	if m.waitRun != run || m.waitSince.IsZero() {
		m.waitRun, m.waitSince = run, now
	}
	return m.waitSince
}
