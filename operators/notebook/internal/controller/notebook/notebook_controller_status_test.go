package notebook

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodStartFailure(t *testing.T) {
	waiting := func(reason, message string) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "notebook", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
		}}}}
	}
	quota := &corev1.Event{Reason: "FailedCreate", Message: `create Pod nb-0 in StatefulSet nb failed error: pods "nb-0" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=0, limited: pods=0`}
	webhook := &corev1.Event{Reason: "FailedCreate", Message: `create Pod nb-0 in StatefulSet nb failed error: admission webhook "policy.example.com" denied the request `}
	type want struct{ Reason, Message string }
	for name, tc := range map[string]struct {
		pods          []corev1.Pod
		createFailure *corev1.Event
		want          want
	}{
		"no pod yet":          {},
		"starting normally":   {pods: []corev1.Pod{waiting("ContainerCreating", "")}},
		"quota rejection":     {createFailure: quota, want: want{"QuotaExceeded", quota.Message}},
		"webhook rejection":   {createFailure: webhook, want: want{"FailedCreate", `create Pod nb-0 in StatefulSet nb failed error: admission webhook "policy.example.com" denied the request`}},
		"image pull back-off": {pods: []corev1.Pod{waiting("ImagePullBackOff", "Back-off pulling image")}, want: want{"ImagePullBackOff", "Back-off pulling image"}},
		"crash loop":          {pods: []corev1.Pod{waiting("CrashLoopBackOff", "back-off 5m0s ")}, want: want{"CrashLoopBackOff", "back-off 5m0s"}},
		"unschedulable": {
			pods: []corev1.Pod{{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available",
			}}}}},
			want: want{"Unschedulable", "0/3 nodes are available"},
		},
		"a terminating pod's failure is past": {
			pods: []corev1.Pod{func() corev1.Pod {
				p := waiting("CrashLoopBackOff", "x")
				p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
				return p
			}()},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got want
			got.Reason, got.Message = podStartFailure(tc.pods, tc.createFailure)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("podStartFailure (-want +got):\n%s", diff)
			}
		})
	}
}
