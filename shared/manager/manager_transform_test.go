package manager

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestTransformOfStripsManagedFieldsThenSlims: an owned kind with a
// transform gets managed fields stripped and then the operator's own
// transform; a kind without one keeps the manager's default (nil).
func TestTransformOfStripsManagedFieldsThenSlims(t *testing.T) {
	transforms := map[client.Object]toolscache.TransformFunc{&corev1.Pod{}: func(obj any) (any, error) {
		obj.(*corev1.Pod).Spec.Containers = nil
		return obj, nil
	}}
	if transformOf(transforms, &appsv1.StatefulSet{}) != nil {
		t.Error("a kind without a transform got one")
	}
	fn := transformOf(transforms, &corev1.Pod{})
	if fn == nil {
		t.Fatal("no transform for pods")
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	out, err := fn(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if len(got.ManagedFields) != 0 || len(got.Spec.Containers) != 0 || got.Name != "p" {
		t.Errorf("transformed pod %+v: want no managed fields, no containers, its name", got)
	}
}
