package failure

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// podWrapper builds pods fluently for the tables below.
type podWrapper struct{ corev1.Pod }

func newPod(name string) *podWrapper {
	return &podWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "pytorch",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "pytorch"}}},
	}}
}

func (w *podWrapper) exited(code int32, reason, message string) *podWrapper {
	w.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: message}}
	return w
}

func (w *podWrapper) exitedBefore(code int32, reason string) *podWrapper {
	w.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	w.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}
	return w
}

func (w *podWrapper) waiting(reason, message string) *podWrapper {
	w.Status.Phase = corev1.PodPending
	w.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
	return w
}

func (w *podWrapper) disruption(reason, message string) *podWrapper {
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: message})
	return w
}

func (w *podWrapper) reason(reason, message string) *podWrapper {
	w.Status.Reason, w.Status.Message = reason, message
	return w
}

func (w *podWrapper) deleting() *podWrapper {
	w.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	return w
}

// deletingAt marks the pod deleted at second requested with a grace period:
// its deletion timestamp is requested+grace, as the apiserver sets it.
func (w *podWrapper) deletingAt(requested, grace int64) *podWrapper {
	w.DeletionTimestamp = &metav1.Time{Time: time.Unix(requested+grace, 0)}
	w.DeletionGracePeriodSeconds = &grace
	return w
}

// exitedAt is exited with the container's finish at second finished.
func (w *podWrapper) exitedAt(code int32, finished int64) *podWrapper {
	w.exited(code, "Error", "")
	w.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.Time{Time: time.Unix(finished, 0)}
	return w
}

func (w *podWrapper) running() *podWrapper {
	w.Status.Phase = corev1.PodRunning
	w.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	return w
}

func (w *podWrapper) noLimit() *podWrapper {
	w.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	return w
}

func (w *podWrapper) obj() corev1.Pod { return w.Pod }

const (
	infra = trainingv1alpha1.FailureClassInfrastructure
	usr   = trainingv1alpha1.FailureClassUser
)

func TestClassify(t *testing.T) {
	cases := map[string]struct {
		pods []corev1.Pod
		want Result
	}{
		"preempted by the scheduler, SIGTERM exit": {
			pods: []corev1.Pod{newPod("j-r1-worker-0").disruption(corev1.PodReasonPreemptionByScheduler, "Preempted by team-b/big").exited(143, "Error", "").obj()},
			want: Result{Class: infra, Cause: CausePreempted, Pod: "j-r1-worker-0", Container: "pytorch", ExitCode: 143,
				Message: "Pod j-r1-worker-0 was preempted by the scheduler for a higher-priority pod: Preempted by team-b/big"},
		},
		"SIGTERM on drain": {
			pods: []corev1.Pod{newPod("p").disruption(reasonEvictionByEvictionAPI, "Eviction API: evicting").exited(143, "Error", "").obj()},
			want: Result{Class: infra, Cause: CauseDrained, Pod: "p", Container: "pytorch", ExitCode: 143,
				Message: "Pod p was evicted through the Eviction API (a node drain): Eviction API: evicting"},
		},
		"SIGKILL after the drain's grace period": {
			pods: []corev1.Pod{newPod("p").disruption(reasonEvictionByEvictionAPI, "").exited(137, "Error", "").obj()},
			want: Result{Class: infra, Cause: CauseDrained, Pod: "p", Container: "pytorch", ExitCode: 137,
				Message: "Pod p was evicted through the Eviction API (a node drain)"},
		},
		"node taint": {
			pods: []corev1.Pod{newPod("p").disruption(reasonDeletionByTaintManager, "Taint manager: deleting due to NoExecute taint").obj()},
			want: Result{Class: infra, Cause: CauseNodeTainted, Pod: "p",
				Message: "Pod p was deleted because its node got a NoExecute taint: Taint manager: deleting due to NoExecute taint"},
		},
		"node lost (pod garbage collector)": {
			pods: []corev1.Pod{newPod("p").disruption(reasonDeletionByPodGC, "PodGC: node no longer exists").obj()},
			want: Result{Class: infra, Cause: CauseNodeLost, Pod: "p", Message: "Pod p was deleted because its node is gone: PodGC: node no longer exists"},
		},
		"kubelet node-pressure eviction": {
			pods: []corev1.Pod{newPod("p").disruption(corev1.PodReasonTerminationByKubelet, "The node was low on resource: memory.").reason("Evicted", "The node was low on resource: memory.").obj()},
			want: Result{Class: infra, Cause: CauseEvicted, Pod: "p", Message: "Pod p was terminated by the kubelet (node pressure): The node was low on resource: memory."},
		},
		"graceful node shutdown with DisruptionTarget": {
			pods: []corev1.Pod{newPod("p").disruption(corev1.PodReasonTerminationByKubelet, "Pod was terminated in response to imminent node shutdown.").
				reason("Terminated", "Pod was terminated in response to imminent node shutdown.").exited(143, "Error", "").obj()},
			want: Result{Class: infra, Cause: CauseNodeShutdown, Pod: "p", Container: "pytorch", ExitCode: 143,
				Message: "Pod p was terminated because its node shut down: Pod was terminated in response to imminent node shutdown."},
		},
		"node shutdown, older kubelet wording": {
			pods: []corev1.Pod{newPod("p").reason("Shutdown", "Node is shutting, evicting pods").obj()},
			want: Result{Class: infra, Cause: CauseNodeShutdown, Pod: "p", Message: "Pod p was terminated because its node shut down: Node is shutting, evicting pods"},
		},
		"unknown disruption reason": {
			pods: []corev1.Pod{newPod("p").disruption("SomethingNew", "").obj()},
			want: Result{Class: infra, Cause: CauseDisrupted, Pod: "p", Message: "Pod p was disrupted (SomethingNew)"},
		},
		"evicted without a condition": {
			pods: []corev1.Pod{newPod("p").reason("Evicted", "The node was low on resource: ephemeral-storage.").obj()},
			want: Result{Class: infra, Cause: CauseEvicted, Pod: "p", Message: "Pod p was evicted by the kubelet: The node was low on resource: ephemeral-storage."},
		},
		"node lost without a condition": {
			pods: []corev1.Pod{newPod("p").reason("NodeLost", "Node n which was running pod p is unresponsive").obj()},
			want: Result{Class: infra, Cause: CauseNodeLost, Pod: "p", Message: "Pod p was lost with its node: Node n which was running pod p is unresponsive"},
		},
		"deleted while running, SIGTERM": {
			pods: []corev1.Pod{newPod("p").deleting().exited(143, "Error", "").obj()},
			want: Result{Class: infra, Cause: CausePodDeleted, Pod: "p", Container: "pytorch", ExitCode: 143, Message: "Pod p was deleted while it ran; container pytorch exited with code 143"},
		},
		"deleted and still terminating, its peer crashed on the lost connection": {
			pods: []corev1.Pod{
				newPod("j-r1-0").exitedAt(1, 105).obj(),
				newPod("j-r1-1").deletingAt(100, 30).running().obj(),
			},
			want: Result{Class: infra, Cause: CausePodDeleted, Pod: "j-r1-1", Message: "Pod j-r1-1 was deleted while it ran"},
		},
		"deleted before its container started": {
			pods: []corev1.Pod{newPod("p").deletingAt(100, 30).waiting("ContainerCreating", "").obj()},
			want: Result{Class: infra, Cause: CausePodDeleted, Pod: "p", Message: "Pod p was deleted while it ran"},
		},
		"deleted, the program exited 1 on SIGTERM in the same second": {
			pods: []corev1.Pod{newPod("p").deletingAt(100, 30).exitedAt(1, 100).obj()},
			want: Result{Class: infra, Cause: CausePodDeleted, Pod: "p", Container: "pytorch", ExitCode: 1, Message: "Pod p was deleted while it ran; container pytorch exited with code 1"},
		},
		"the earliest deletion is the cause, the Job controller's later ones are not": {
			pods: []corev1.Pod{
				newPod("j-r1-0").deletingAt(103, 30).exitedAt(143, 104).obj(),
				newPod("j-r1-1").deletingAt(100, 30).exitedAt(143, 101).obj(),
			},
			want: Result{Class: infra, Cause: CausePodDeleted, Pod: "j-r1-1", Container: "pytorch", ExitCode: 143, Message: "Pod j-r1-1 was deleted while it ran; container pytorch exited with code 143"},
		},
		"a peer that failed before the deletion is the failure (the Job controller deleted the rest)": {
			pods: []corev1.Pod{
				newPod("j-r1-0").deletingAt(101, 30).running().obj(),
				newPod("j-r1-1").exitedAt(1, 100).obj(),
			},
			want: Result{Class: usr, Cause: CauseError, Pod: "j-r1-1", Container: "pytorch", ExitCode: 1, TerminationMessage: "Error",
				Message: "Container pytorch of pod j-r1-1 exited with code 1"},
		},
		"a peer that failed in the deletion's second is the failure": {
			pods: []corev1.Pod{
				newPod("j-r1-0").deletingAt(100, 30).running().obj(),
				newPod("j-r1-1").exitedAt(1, 100).obj(),
			},
			want: Result{Class: usr, Cause: CauseError, Pod: "j-r1-1", Container: "pytorch", ExitCode: 1, TerminationMessage: "Error",
				Message: "Container pytorch of pod j-r1-1 exited with code 1"},
		},
		"a pod that failed before it was deleted is the failure": {
			pods: []corev1.Pod{newPod("p").deletingAt(100, 30).exitedAt(2, 99).obj()},
			want: Result{Class: usr, Cause: CauseError, Pod: "p", Container: "pytorch", ExitCode: 2, TerminationMessage: "Error",
				Message: "Container pytorch of pod p exited with code 2"},
		},
		"non-zero exit with reason Error": {
			pods: []corev1.Pod{newPod("p").exited(1, "Error", "Traceback\nValueError: bad shape").obj()},
			want: Result{Class: usr, Cause: CauseError, Pod: "p", Container: "pytorch", ExitCode: 1, TerminationMessage: "Traceback\nValueError: bad shape",
				Message: "Container pytorch of pod p exited with code 1"},
		},
		"SIGTERM exit (143) without any disruption is the program's": {
			pods: []corev1.Pod{newPod("p").exited(143, "Error", "").obj()},
			want: Result{Class: usr, Cause: CauseError, Pod: "p", Container: "pytorch", ExitCode: 143, TerminationMessage: "Error",
				Message: "Container pytorch of pod p exited with code 143"},
		},
		"OOMKilled with container and limit": {
			pods: []corev1.Pod{newPod("p").exited(137, "OOMKilled", "").obj()},
			want: Result{Class: usr, Cause: CauseOOMKilled, Pod: "p", Container: "pytorch", ExitCode: 137, MemoryLimit: "16Gi", TerminationMessage: "OOMKilled",
				Message: "Container pytorch of pod p was OOMKilled: it exceeded its memory limit of 16Gi"},
		},
		"OOMKilled before an in-place restart": {
			pods: []corev1.Pod{newPod("p").exitedBefore(137, "OOMKilled").obj()},
			want: Result{Class: usr, Cause: CauseOOMKilled, Pod: "p", Container: "pytorch", ExitCode: 137, MemoryLimit: "16Gi", TerminationMessage: "OOMKilled",
				Message: "Container pytorch of pod p was OOMKilled: it exceeded its memory limit of 16Gi"},
		},
		"OOMKilled without a limit (node memory)": {
			pods: []corev1.Pod{newPod("p").noLimit().exited(137, "OOMKilled", "").obj()},
			want: Result{Class: usr, Cause: CauseOOMKilled, Pod: "p", Container: "pytorch", ExitCode: 137, TerminationMessage: "OOMKilled",
				Message: "Container pytorch of pod p was OOMKilled"},
		},
		"SIGKILL (137) that is not OOMKilled": {
			pods: []corev1.Pod{newPod("p").exited(137, "Error", "").obj()},
			want: Result{Class: usr, Cause: CauseKilled, Pod: "p", Container: "pytorch", ExitCode: 137, TerminationMessage: "Error",
				Message: "Container pytorch of pod p was killed (SIGKILL, exit code 137) without running out of memory"},
		},
		"image pull error": {
			pods: []corev1.Pod{newPod("p").waiting("ImagePullBackOff", `Back-off pulling image "x"`).obj()},
			want: Result{Class: usr, Cause: CauseImagePullFailed, Pod: "p", Container: "pytorch", Message: `Container pytorch of pod p: ImagePullBackOff: Back-off pulling image "x"`},
		},
		"invalid image name": {
			pods: []corev1.Pod{newPod("p").waiting("InvalidImageName", "bad").obj()},
			want: Result{Class: usr, Cause: CauseImagePullFailed, Pod: "p", Container: "pytorch", Message: "Container pytorch of pod p: InvalidImageName: bad"},
		},
		"config error": {
			pods: []corev1.Pod{newPod("p").waiting("CreateContainerConfigError", `secret "s" not found`).obj()},
			want: Result{Class: usr, Cause: CauseConfigError, Pod: "p", Container: "pytorch", Message: `Container pytorch of pod p: CreateContainerConfigError: secret "s" not found`},
		},
		"a preempted worker beats its peers' communication errors": {
			pods: []corev1.Pod{
				newPod("j-r1-master-0").exited(1, "Error", "NCCL error: remote process exited").obj(),
				newPod("j-r1-worker-0").disruption(corev1.PodReasonPreemptionByScheduler, "").exited(143, "Error", "").obj(),
			},
			want: Result{Class: infra, Cause: CausePreempted, Pod: "j-r1-worker-0", Container: "pytorch", ExitCode: 143,
				Message: "Pod j-r1-worker-0 was preempted by the scheduler for a higher-priority pod"},
		},
		"OOMKilled beats a disruption elsewhere": {
			pods: []corev1.Pod{
				newPod("j-r1-master-0").exited(137, "OOMKilled", "").obj(),
				newPod("j-r1-worker-0").disruption(reasonEvictionByEvictionAPI, "").obj(),
			},
			want: Result{Class: usr, Cause: CauseOOMKilled, Pod: "j-r1-master-0", Container: "pytorch", ExitCode: 137, MemoryLimit: "16Gi", TerminationMessage: "OOMKilled",
				Message: "Container pytorch of pod j-r1-master-0 was OOMKilled: it exceeded its memory limit of 16Gi"},
		},
		"first failed pod by name": {
			pods: []corev1.Pod{newPod("j-worker-0").exited(2, "Error", "worker").obj(), newPod("j-master-0").exited(1, "Error", "master").obj()},
			want: Result{Class: usr, Cause: CauseError, Pod: "j-master-0", Container: "pytorch", ExitCode: 1, TerminationMessage: "master",
				Message: "Container pytorch of pod j-master-0 exited with code 1"},
		},
		"no pods": {
			want: Result{Class: trainingv1alpha1.FailureClassUnknown, Cause: CauseUnknown, Message: "The pods do not explain the failure"},
		},
		"only successful containers": {
			pods: []corev1.Pod{newPod("p").exited(0, "Completed", "").obj()},
			want: Result{Class: trainingv1alpha1.FailureClassUnknown, Cause: CauseUnknown, Message: "The pods do not explain the failure"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Classify(tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
			if got.Retryable() != (tc.want.Class == infra) {
				t.Errorf("Retryable() = %v for class %s", got.Retryable(), got.Class)
			}
		})
	}
}
