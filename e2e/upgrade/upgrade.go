package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// PodState is what an upgrade must not change about a pod.
type PodState struct {
	UID      string
	Restarts int32
}

// PodStates maps the pods of ns to their UID and total container restarts.
func PodStates(ctx context.Context, c client.Client, ns string) (map[string]PodState, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]PodState{}
	for _, p := range pods.Items {
		s := PodState{UID: string(p.UID)}
		for _, cs := range p.Status.ContainerStatuses {
			s.Restarts += cs.RestartCount
		}
		out[p.Name] = s
	}
	return out, nil
}

// Changed lists the pods of before that are gone, replaced (another UID)
// or restarted in after.
func Changed(before, after map[string]PodState) []string {
	var out []string
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			out = append(out, name+": gone")
		case a.UID != b.UID:
			out = append(out, fmt.Sprintf("%s: recreated (uid %s -> %s)", name, b.UID, a.UID))
		case a.Restarts != b.Restarts:
			out = append(out, fmt.Sprintf("%s: restarted (%d -> %d)", name, b.Restarts, a.Restarts))
		}
	}
	return out
}

// CRDDrift compares the schema of every version of each CRD the charts
// under chartsDir generate (files/crds/*.yaml) with the one the cluster
// serves, and lists the CRDs that differ or are missing.
func CRDDrift(ctx context.Context, c client.Client, chartsDir string) ([]string, int, error) {
	files, err := filepath.Glob(filepath.Join(chartsDir, "*", "files", "crds", "*.yaml"))
	if err != nil {
		return nil, 0, err
	}
	var drift []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		want := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &want.Object); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", f, err)
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKey{Name: want.GetName()}, live); err != nil {
			drift = append(drift, fmt.Sprintf("%s: %v", want.GetName(), err))
			continue
		}
		if !equal(normalized(schemas(want)), normalized(schemas(live))) {
			drift = append(drift, want.GetName()+": served schema differs from "+f)
		}
	}
	return drift, len(files), nil
}

// normalized is v through JSON, so that numbers read from YAML (float64)
// and from the API server (int64) compare equal.
func normalized(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return err.Error()
	}
	return out
}

// schemas maps each version of a CRD to its openAPIV3Schema.
func schemas(crd *unstructured.Unstructured) map[string]any {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	out := map[string]any{}
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		s, _, _ := unstructured.NestedFieldNoCopy(m, "schema", "openAPIV3Schema")
		out[name] = s
	}
	return out
}

func equal(a, b any) bool { return reflect.DeepEqual(a, b) }
