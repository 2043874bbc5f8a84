package notebook

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/culling"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/podrefusal"
)

// computeStatus derives the whole status from what this reconcile observed
// and decided. It reads nothing else, so the same observations always give
// the same status and an unchanged notebook costs no write.
func computeStatus(s *scope) {
	nb := s.nb
	cfg := s.input.Config
	st := &nb.Status
	st.Image = render.Image(nb, cfg)
	st.URL = render.URL(nb, cfg)
	st.IngressURL = render.IngressURL(nb, cfg)
	st.WorkspaceClaimName = render.WorkspaceClaimName(nb)
	if s.token != "" {
		st.TokenSecretName = render.TokenSecretName(nb)
	}
	st.Culling = cullingStatus(s)
	reportActivity(s, cfg.ReportInterval.Duration)
	markWorkspace(s)

	if s.stalled != "" {
		conditions.Remove(nb, notebooksv1alpha1.ConditionQueued)
		st.Queue = nil
		conditions.MarkStalled(nb, s.stalled, s.stalledMsg)
		st.Phase = notebooksv1alpha1.PhaseFailed
		return
	}

	markDecisions(s)
	markStores(s)
	markQueue(s)
	st.Phase = markServing(s)
}

// reportActivity records the culling decision's last activity, at most
// every interval, and the cull deadline that stands, if any.
func reportActivity(s *scope, interval time.Duration) {
	st := &s.nb.Status
	if d := s.decision; d != nil {
		var reported time.Time
		if st.LastActivity != nil {
			reported = st.LastActivity.Time
		}
		if culling.ShouldReport(reported, d.LastActivity, interval) {
			st.LastActivity = &metav1.Time{Time: d.LastActivity}
		}
		if d.Deadline.IsZero() || d.Action == culling.Cull {
			st.CullDeadline = nil
		} else {
			st.CullDeadline = &metav1.Time{Time: d.Deadline}
		}
	}
	if s.replicas == 0 {
		st.CullDeadline = nil
	}
}

// markDecisions sets the conditions of the lifecycle decisions:
// Suspended, Culled and UpdatePending.
func markDecisions(s *scope) {
	nb := s.nb
	if nb.Spec.Suspend {
		conditions.MarkTrue(nb, commonv1alpha1.ConditionSuspended, notebooksv1alpha1.ReasonSuspended, "The Jupyter server is stopped; the workspace is kept")
	} else {
		conditions.MarkFalse(nb, commonv1alpha1.ConditionSuspended, notebooksv1alpha1.ReasonRunning, "The Notebook is not suspended")
	}
	if s.culled != "" {
		conditions.MarkTrue(nb, notebooksv1alpha1.ConditionCulled, s.culled, culledMessage(s.culled))
	} else {
		conditions.MarkFalse(nb, notebooksv1alpha1.ConditionCulled, notebooksv1alpha1.ReasonRunning, "The Notebook is not culled")
	}
	if s.deferred {
		conditions.MarkTrue(nb, notebooksv1alpha1.ConditionUpdatePending, notebooksv1alpha1.ReasonKernelBusy,
			fmt.Sprintf("A spec change restarts the Jupyter server and waits until no kernel is busy; annotate %s with a new value to apply it now", notebooksv1alpha1.AnnotationForceUpdate))
	} else {
		conditions.Remove(nb, notebooksv1alpha1.ConditionUpdatePending)
	}
}

// markWorkspace records the workspace claim's size and sets
// WorkspaceResizePending while spec.workspace.size waits. When
// resizeWorkspace did not run (an earlier phase halted), both stay as the
// last reconcile that saw the claim left them.
func markWorkspace(s *scope) {
	ws := s.workspace
	if ws == nil {
		return
	}
	s.nb.Status.Workspace = &notebooksv1alpha1.WorkspaceStatus{Size: ptr.To(ws.size), Capacity: ws.capacity}
	if ws.pending == "" {
		conditions.Remove(s.nb, notebooksv1alpha1.ConditionWorkspaceResizePending)
		return
	}
	conditions.MarkTrue(s.nb, notebooksv1alpha1.ConditionWorkspaceResizePending, ws.pending, ws.pendingMsg)
}

// markStores sets FeatureStoresReady when the Notebook names stores.
func markStores(s *scope) {
	nb := s.nb
	if s.stores != nil {
		if s.stores.AllReady() {
			conditions.MarkTrue(nb, notebooksv1alpha1.ConditionFeatureStoresReady, s.stores.Reason(), s.stores.Message())
		} else {
			conditions.MarkFalse(nb, notebooksv1alpha1.ConditionFeatureStoresReady, s.stores.Reason(), s.stores.Message()+"; the Notebook runs without it and mounts it once Ready")
		}
	} else {
		conditions.Remove(nb, notebooksv1alpha1.ConditionFeatureStoresReady)
	}
}

// markServing sets Ready, Reconciling and Stalled from what the server is
// doing, and returns the phase. The three follow kstatus
// (sigs.k8s.io/cli-utils pkg/kstatus/status.Compute), which Helm, Flux and
// Argo CD use: Stalled=True is Failed, Reconciling=True is InProgress, and
// without either, Ready=False is InProgress too while an absent Ready is
// Current.
func markServing(s *scope) notebooksv1alpha1.Phase {
	nb := s.nb
	podReason, podMessage := podStartFailure(s.pods, s.createFailure)
	switch {
	case nb.Spec.Suspend:
		settledNotServing(nb)
		return notebooksv1alpha1.PhaseSuspended
	case s.culled != "":
		settledNotServing(nb)
		return notebooksv1alpha1.PhaseCulled
	case s.waiting != "":
		conditions.MarkReconciling(nb, commonv1alpha1.ReasonProgressing, s.waiting)
		return notebooksv1alpha1.PhasePending
	case waitingInQueue(s) != nil:
		conditions.MarkReconciling(nb, notebooksv1alpha1.ReasonQueued, queuedMessage(nb, s.queue))
		return notebooksv1alpha1.PhaseQueued
	case s.running && s.probe != nil && s.probe.OK():
		conditions.MarkReady(nb, notebooksv1alpha1.ReasonRunning, "The Jupyter server is ready and answers")
		return notebooksv1alpha1.PhaseRunning
	case podReason != "" && stuckContainerReasons[podReason]:
		// The kubelet keeps retrying, but only the user can end this: the
		// status recovers by itself once a retry works.
		conditions.MarkStalled(nb, notebooksv1alpha1.ReasonPodStartFailed, podReason+": "+podMessage)
		return notebooksv1alpha1.PhaseFailed
	case s.createFailure != nil:
		// The API server refuses the pod (quota, Pod Security, an
		// admission webhook): the reason every kind gives this situation.
		// It may clear without the user (quota freed): still in progress.
		conditions.MarkReconciling(nb, commonv1alpha1.ReasonPodsRefused, podReason+": "+podMessage)
		return notebooksv1alpha1.PhaseFailed
	case podReason != "":
		// Scheduling may clear without the user (a node added): still in
		// progress.
		conditions.MarkReconciling(nb, notebooksv1alpha1.ReasonPodStartFailed, podReason+": "+podMessage)
		return notebooksv1alpha1.PhaseFailed
	case s.running && s.probe == nil && s.probePending:
		// Not answering is for a probe that failed to say.
		conditions.MarkReconciling(nb, notebooksv1alpha1.ReasonStarting, "The pod is ready; waiting for the Jupyter server's first answer")
		return notebooksv1alpha1.PhasePending
	case s.running:
		conditions.MarkReconciling(nb, notebooksv1alpha1.ReasonJupyterNotReady, "The pod is ready but Jupyter does not answer its REST API with the Notebook's token")
		return notebooksv1alpha1.PhasePending
	default:
		conditions.MarkReconciling(nb, notebooksv1alpha1.ReasonStarting, "Waiting for the Jupyter pod to become ready")
		return notebooksv1alpha1.PhasePending
	}
}

// settledNotServing marks a Notebook that is deliberately not serving
// (suspended or culled; the Suspended and Culled conditions say which).
// Ready is removed rather than set to False: kstatus reads a Ready=False
// without Reconciling as InProgress, so Helm's and Flux's waits would never
// end on a Notebook that is exactly as its user asked.
func settledNotServing(nb *notebooksv1alpha1.Notebook) {
	conditions.Remove(nb, commonv1alpha1.ConditionReady)
	conditions.Remove(nb, commonv1alpha1.ConditionReconciling)
	conditions.Remove(nb, commonv1alpha1.ConditionStalled)
}

func culledMessage(reason string) string {
	why := "after a period without kernel or terminal activity"
	if reason == culling.ReasonMaxLifetime {
		why = "at the end of its maximum lifetime"
	}
	return fmt.Sprintf("The Jupyter server was stopped %s; the workspace is kept. Annotate the Notebook with %s=<a new value> to start it again",
		why, notebooksv1alpha1.AnnotationRestart)
}

func cullingStatus(s *scope) *notebooksv1alpha1.CullingStatus {
	cs := &notebooksv1alpha1.CullingStatus{}
	if s.policy.IdleTimeout > 0 {
		cs.IdleTimeout = &metav1.Duration{Duration: s.policy.IdleTimeout}
	}
	if s.policy.MaxLifetime > 0 {
		cs.MaxLifetime = &metav1.Duration{Duration: s.policy.MaxLifetime}
	}
	return cs
}

// stuckContainerReasons are container waiting reasons that do not resolve
// by waiting: the user has to act (fix the image, the pull secret, the
// configuration, the crashing program).
var stuckContainerReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true,
}

// podStartFailure reports why the Notebook's pod cannot start, if it
// cannot: not created (a ResourceQuota or an admission webhook refused it:
// createFailure is the StatefulSet controller's event, given only while no
// pod exists), unschedulable, or a container stuck on its image or config.
func podStartFailure(pods []corev1.Pod, createFailure *corev1.Event) (reason, message string) {
	if createFailure != nil {
		return podrefusal.Cause(createFailure)
	}
	for _, pod := range pods {
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return corev1.PodReasonUnschedulable, c.Message
			}
		}
		for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && stuckContainerReasons[w.Reason] {
				return w.Reason, strings.TrimSpace(w.Message)
			}
		}
	}
	return "", ""
}
