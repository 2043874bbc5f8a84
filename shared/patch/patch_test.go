package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
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

// TestMergePatchSaysWhatMergeFromSays compares the patch the helper builds
// from the changed part alone with the one controller-runtime's MergeFrom
// renders from both whole objects.
func TestMergePatchSaysWhatMergeFromSays(t *testing.T) {
	spec := map[string]any{"image": "train:1", "args": []any{"--lr=0.1"}, "template": map[string]any{"labels": map[string]any{"a": "b"}}}
	whole := func(meta, status map[string]any) *unstructured.Unstructured {
		m := map[string]any{"apiVersion": "training.mlplatform.dev/v1alpha1", "kind": "TrainingJob", "spec": runtime.DeepCopyJSONValue(spec)}
		if meta != nil {
			m["metadata"] = meta
		}
		if status != nil {
			m["status"] = status
		}
		return &unstructured.Unstructured{Object: m}
	}
	meta := func(extra map[string]any) map[string]any {
		m := map[string]any{"name": "w", "namespace": "ns", "resourceVersion": "7", "uid": "u1"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := map[string]struct {
		part          string
		before, after *unstructured.Unstructured
	}{
		"a scalar changes, one is added, one is dropped": {
			part:   "status",
			before: whole(meta(nil), map[string]any{"phase": "Running", "startTime": "t0", "duration": "1s"}),
			after:  whole(meta(nil), map[string]any{"phase": "Succeeded", "startTime": "t0", "completionTime": "t1"}),
		},
		"a list is replaced whole": {
			part:   "status",
			before: whole(meta(nil), map[string]any{"conditions": []any{cond("Ready", "False"), cond("B", "True")}}),
			after:  whole(meta(nil), map[string]any{"conditions": []any{cond("Ready", "True"), cond("B", "True")}}),
		},
		"an object is patched field by field": {
			part:   "status",
			before: whole(meta(nil), map[string]any{"queue": map[string]any{"name": "q", "position": int64(3), "gone": "x"}}),
			after:  whole(meta(nil), map[string]any{"queue": map[string]any{"name": "q", "position": int64(1), "admitted": true}}),
		},
		"the first status": {
			part:   "status",
			before: whole(meta(nil), nil),
			after:  whole(meta(nil), map[string]any{"observedGeneration": int64(1), "job": map[string]any{"name": "j"}}),
		},
		"labels and finalizers": {
			part:   "metadata",
			before: whole(meta(map[string]any{"labels": map[string]any{"a": "1", "gone": "x"}}), nil),
			after:  whole(meta(map[string]any{"labels": map[string]any{"a": "2", "new": "y"}, "finalizers": []any{"ours"}}), nil),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := client.MergeFromWithOptions(tc.before, client.MergeFromWithOptimisticLock{}).Data(tc.after)
			if err != nil {
				t.Fatal(err)
			}
			p, changed, err := mergePatchOf(tc.before, tc.after, tc.part)
			if err != nil || !changed {
				t.Fatalf("changed %v, error %v", changed, err)
			}
			got, err := p.Data(tc.after)
			if err != nil {
				t.Fatal(err)
			}
			var w, g any
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("patch (-MergeFrom +ours):\n%s", diff)
			}
		})
	}
	same := whole(meta(nil), map[string]any{"phase": "Running", "queue": map[string]any{"name": "q"}})
	if _, changed, _ := mergePatchOf(same, same.DeepCopy(), "status"); changed {
		t.Error("an unchanged status makes a patch")
	}
}

// TestPatchLeavesTheObjectAsTheServerHasIt checks what obj holds after a
// status write: what the API server answered, spec included, also when a
// conflict made the helper start again from a newer object whose spec
// changed in between.
func TestPatchLeavesTheObjectAsTheServerHasIt(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := trainingv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, conflict := range []bool{false, true} {
		t.Run(fmt.Sprintf("conflict %v", conflict), func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(runningJob(true)).WithStatusSubresource(&trainingv1alpha1.TrainingJob{}).Build()
			tj := &trainingv1alpha1.TrainingJob{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(runningJob(true)), tj); err != nil {
				t.Fatal(err)
			}
			h, err := NewHelper(tj, c, c)
			if err != nil {
				t.Fatal(err)
			}
			if conflict {
				newer := tj.DeepCopy()
				newer.Spec.Args = append(newer.Spec.Args, "--resume")
				if err := c.Update(ctx, newer); err != nil {
					t.Fatal(err)
				}
			}
			finish(tj)
			if _, err := h.Patch(ctx, tj); err != nil {
				t.Fatal(err)
			}
			live := &trainingv1alpha1.TrainingJob{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(tj), live); err != nil {
				t.Fatal(err)
			}
			if live.Status.Phase != trainingv1alpha1.PhaseSucceeded {
				t.Fatalf("live phase %q, want the write to have landed", live.Status.Phase)
			}
			if diff := cmp.Diff(live.ObjectMeta, tj.ObjectMeta); diff != "" {
				t.Errorf("metadata (-live +obj):\n%s", diff)
			}
			if diff := cmp.Diff(live.Spec, tj.Spec); diff != "" {
				t.Errorf("spec (-live +obj):\n%s", diff)
			}
			if diff := cmp.Diff(live.Status, tj.Status); diff != "" {
				t.Errorf("status (-live +obj):\n%s", diff)
			}
		})
	}
}
