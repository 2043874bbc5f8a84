package podsecurity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestHardenedPodIsRestricted(t *testing.T) {
	spec := &corev1.PodSpec{
		SecurityContext: PodSecurityContext(1000),
		Containers:      []corev1.Container{{Name: "c", Image: "i", SecurityContext: ContainerSecurityContext()}},
	}
	if err := CheckRestricted(&metav1.ObjectMeta{}, spec); err != nil {
		t.Fatal(err)
	}
	spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	spec.Containers = append(spec.Containers, corev1.Container{Name: "bare", Image: "i"})
	err := CheckRestricted(&metav1.ObjectMeta{}, spec)
	if err == nil || !strings.Contains(err.Error(), "allowPrivilegeEscalation") || !strings.Contains(err.Error(), `"bare"`) {
		t.Fatalf("err = %v, want the escalation and the bare container named", err)
	}
}
