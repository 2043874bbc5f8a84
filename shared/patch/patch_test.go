package patch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(labels map[string]string, finalizers []string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName("w")
	u.SetLabels(labels)
	u.SetFinalizers(finalizers)
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// annotated is u with the annotation k=v, as the API server holds an
// object whose cached copy had it stripped (manager.StripLastApplied).
func annotated(u *unstructured.Unstructured, k, v string) *unstructured.Unstructured {
	u.SetAnnotations(map[string]string{k: v})
	return u
}

func cond(t, s string) map[string]any { return map[string]any{"type": t, "status": s} }

func TestMetadataDeltaReplaysOnNewerObject(t *testing.T) {
	cases := map[string]struct {
		before, after, live *unstructured.Unstructured
		want                *unstructured.Unstructured
	}{
		"add finalizer keeps a concurrent one": {
			before: obj(nil, nil, nil),
			after:  obj(nil, []string{"ours"}, nil),
			live:   obj(nil, []string{"theirs"}, nil),
			want:   obj(nil, []string{"theirs", "ours"}, nil),
		},
		"remove finalizer keeps a concurrent one": {
			before: obj(nil, []string{"ours"}, nil),
			after:  obj(nil, nil, nil),
			live:   obj(nil, []string{"ours", "theirs"}, nil),
			want:   obj(nil, []string{"theirs"}, nil),
		},
		"an annotation the cache dropped stays": {
			before: obj(nil, nil, nil),
			after:  obj(nil, []string{"ours"}, nil),
			live:   annotated(obj(nil, nil, nil), "kubectl.kubernetes.io/last-applied-configuration", "{}"),
			want:   annotated(obj(nil, []string{"ours"}, nil), "kubectl.kubernetes.io/last-applied-configuration", "{}"),
		},
		"label change keeps a concurrent label": {
			before: obj(map[string]string{"a": "1", "gone": "x"}, nil, nil),
			after:  obj(map[string]string{"a": "2"}, nil, nil),
			live:   obj(map[string]string{"a": "1", "gone": "x", "theirs": "y"}, nil, nil),
			want:   obj(map[string]string{"a": "2", "theirs": "y"}, nil, nil),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := diffMetadata(tc.before, tc.after)
			if d.empty() {
				t.Fatal("delta is empty")
			}
			got := tc.live.DeepCopy()
			d.applyTo(got)
			if diff := cmp.Diff(tc.want.Object, got.Object); diff != "" {
				t.Errorf("replayed object (-want +got):\n%s", diff)
			}
		})
	}
	if !diffMetadata(obj(map[string]string{"a": "1"}, []string{"f"}, nil), obj(map[string]string{"a": "1"}, []string{"f"}, nil)).empty() {
		t.Error("unchanged metadata gives a non-empty delta")
	}
}

func TestStatusDeltaReplaysOnNewerObject(t *testing.T) {
	cases := map[string]struct {
		before, after, live map[string]any
		want                map[string]any
	}{
		"a condition another writer added survives": {
			before: map[string]any{"conditions": []any{cond("Ready", "False")}},
			after:  map[string]any{"phase": "Up", "conditions": []any{cond("Ready", "True")}},
			live:   map[string]any{"conditions": []any{cond("Ready", "False"), cond("Theirs", "True")}},
			want:   map[string]any{"phase": "Up", "conditions": []any{cond("Ready", "True"), cond("Theirs", "True")}},
		},
		"our removal and addition replay, their change to an untouched type wins": {
			before: map[string]any{"conditions": []any{cond("Old", "True"), cond("Kept", "True")}},
			after:  map[string]any{"conditions": []any{cond("Kept", "True"), cond("New", "True")}},
			live:   map[string]any{"conditions": []any{cond("Old", "True"), cond("Kept", "False")}},
			want:   map[string]any{"conditions": []any{cond("Kept", "False"), cond("New", "True")}},
		},
		"a field another writer changed in between survives": {
			before: map[string]any{"phase": "Pending", "run": int64(1)},
			after:  map[string]any{"phase": "Running", "run": int64(1)},
			live:   map[string]any{"phase": "Pending", "run": int64(2)},
			want:   map[string]any{"phase": "Running", "run": int64(2)},
		},
		"a cleared field is removed": {
			before: map[string]any{"completionTime": "x", "observedGeneration": int64(1)},
			after:  map[string]any{"observedGeneration": int64(2)},
			live:   map[string]any{"completionTime": "x", "observedGeneration": int64(1)},
			want:   map[string]any{"observedGeneration": int64(2)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := diffStatus(obj(nil, nil, tc.before), obj(nil, nil, tc.after))
			if d.empty() {
				t.Fatal("delta is empty")
			}
			got := obj(nil, nil, tc.live)
			d.applyTo(got)
			if diff := cmp.Diff(tc.want, got.Object["status"]); diff != "" {
				t.Errorf("replayed status (-want +got):\n%s", diff)
			}
		})
	}
	same := map[string]any{"phase": "Up", "conditions": []any{cond("Ready", "True"), cond("B", "True")}}
	reordered := map[string]any{"phase": "Up", "conditions": []any{cond("B", "True"), cond("Ready", "True")}}
	if !diffStatus(obj(nil, nil, same), obj(nil, nil, reordered)).empty() {
		t.Error("reordered but equal conditions give a non-empty delta")
	}
}
