package upgrade

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestChangedNamesGoneRecreatedAndRestartedPods(t *testing.T) {
	before := map[string]PodState{"kept": {"a", 0}, "gone": {"b", 0}, "recreated": {"c", 0}, "restarted": {"d", 1}}
	after := map[string]PodState{"kept": {"a", 0}, "recreated": {"x", 0}, "restarted": {"d", 2}, "new": {"e", 0}}
	got := Changed(before, after)
	slices.Sort(got)
	want := []string{"gone: gone", "recreated: recreated (uid c -> x)", "restarted: restarted (1 -> 2)"}
	if !slices.Equal(got, want) {
		t.Errorf("Changed = %q, want %q", got, want)
	}
}

func TestSchemasCompareAcrossNumberTypes(t *testing.T) {
	crd := func(maxItems any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"versions": []any{
			map[string]any{"name": "v1alpha1", "schema": map[string]any{"openAPIV3Schema": map[string]any{"maxItems": maxItems}}},
		}}}}
	}
	a, b, c := normalized(schemas(crd(float64(32)))), normalized(schemas(crd(int64(32)))), normalized(schemas(crd(int64(16))))
	if !equal(a, b) {
		t.Errorf("32 from YAML and from the API server differ: %v, %v", a, b)
	}
	if equal(a, c) {
		t.Errorf("different schemas compare equal: %v, %v", a, c)
	}
}
