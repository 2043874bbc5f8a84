package manager

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	if transformOf(Options{Transforms: transforms}, &appsv1.StatefulSet{}) != nil {
		t.Error("a kind without a transform got one")
	}
	fn := transformOf(Options{Transforms: transforms}, &corev1.Pod{})
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

// TestStripLastAppliedKeepsEveryOtherAnnotation: kubectl's copy of the
// applied object goes, the other annotations stay, and an object left with
// none has a nil map, as one decoded without any.
func TestStripLastAppliedKeepsEveryOtherAnnotation(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","kind":"Pod"}`, "team": "vision",
	}}}
	out, err := StripLastApplied(pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*corev1.Pod).Annotations; len(got) != 1 || got["team"] != "vision" {
		t.Errorf("annotations after the transform: %v, want only team", got)
	}
	only := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}"}}}
	if out, _ := StripLastApplied(only); out.(*corev1.Pod).Annotations != nil {
		t.Errorf("annotations %v, want nil", out.(*corev1.Pod).Annotations)
	}
	if out, err := StripLastApplied("not an object"); err != nil || out != "not an object" {
		t.Errorf("StripLastApplied of a non-object = %v, %v; want it unchanged", out, err)
	}
}

// TestUnownedTransformedAreTheOperatorsOwnKinds: a transform of a kind the
// operator owns (optional or not) is applied with the owned cache's label
// selector; one of another kind gets a cache of its own.
func TestUnownedTransformedAreTheOperatorsOwnKinds(t *testing.T) {
	id := func(obj any) (any, error) { return obj, nil }
	opts := Options{
		OwnedObjects:         []client.Object{&corev1.Pod{}},
		OptionalOwnedObjects: []client.Object{&appsv1.StatefulSet{}},
		Transforms: map[client.Object]toolscache.TransformFunc{
			&corev1.Pod{}: id, &appsv1.StatefulSet{}: id, &corev1.ConfigMap{}: StripLastApplied,
		},
	}
	got := unownedTransformed(opts)
	if len(got) != 1 {
		t.Fatalf("unowned transformed kinds %v, want the ConfigMap only", got)
	}
	if _, ok := got[0].(*corev1.ConfigMap); !ok {
		t.Errorf("unowned transformed kind %T, want *v1.ConfigMap", got[0])
	}
}

// TestUnstructuredKindsAreTransformedByTheirKind: a transform keyed by an
// unstructured object applies to the objects of that object's kind alone,
// by the cache's default transform (its CRD may be installed after the
// operator started, when no cache of its own could be set up), and not to
// another kind held as unstructured.
func TestUnstructuredKindsAreTransformedByTheirKind(t *testing.T) {
	kind := func(k string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: k})
		u.SetName("x")
		_ = unstructured.SetNestedField(u.Object, "big", "spec", "podSets")
		return u
	}
	dropSpec := func(obj any) (any, error) {
		delete(obj.(*unstructured.Unstructured).Object, "spec")
		return obj, nil
	}
	opts := Options{Transforms: map[client.Object]toolscache.TransformFunc{kind("Workload"): dropSpec}}
	if got := unownedTransformed(opts); len(got) != 0 {
		t.Errorf("an unstructured kind got a cache of its own: %v", got)
	}
	fn := defaultTransform(opts)
	for k, wantSpec := range map[string]bool{"Workload": false, "LocalQueue": true} {
		out, err := fn(kind(k))
		if err != nil {
			t.Fatal(err)
		}
		if _, has := out.(*unstructured.Unstructured).Object["spec"]; has != wantSpec {
			t.Errorf("%s after the default transform keeps its spec: %t, want %t", k, has, wantSpec)
		}
	}
	if fn := CacheTransform(opts, kind("LocalQueue")); fn == nil {
		t.Fatal("no transform")
	} else if out, _ := fn(kind("LocalQueue")); out.(*unstructured.Unstructured).Object["spec"] == nil {
		t.Error("CacheTransform of another unstructured kind applied the Workload's transform")
	}
}
