package quickstart

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/shared/charttest"
)

func TestUmbrellaLints(t *testing.T) {
	kind, err := LoadValues(KindValues)
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string]map[string]any{
		"defaults":    nil,
		"kind values": kind,
	} {
		t.Run(name, func(t *testing.T) {
			if err := charttest.Lint(ChartDir, values); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestUmbrellaSchemaRejectsUnknownKeys(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"top level":          {"trainingjob": map[string]any{"enabled": true}},
		"in an operator":     {"notebook-operator": map[string]any{"imagee": map[string]any{}}},
		"enabled not a bool": {"featurestore-operator": map[string]any{"enabled": "yes"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := charttest.Render(ChartDir, Release, Namespace, values); err == nil {
				t.Errorf("values %v rendered; want a schema error", values)
			}
		})
	}
}

func TestUmbrellaConditionsSwitchOperatorsOff(t *testing.T) {
	manifest, err := charttest.Render(ChartDir, Release, Namespace, map[string]any{
		"notebook-operator":     map[string]any{"enabled": false},
		"featurestore-operator": map[string]any{"enabled": false},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range deployments(t, manifest) {
		got = append(got, d.Name)
	}
	if diff := cmp.Diff([]string{"ml-platform-trainingjob-operator"}, got); diff != "" {
		t.Errorf("Deployments (-want +got):\n%s", diff)
	}
}

// kindRender renders the umbrella as make quickstart installs it.
func kindRender(t *testing.T) string {
	t.Helper()
	values, err := LoadValues(KindValues)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := charttest.Render(ChartDir, Release, Namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return manifest
}

func TestKindRenderRunsTheLocalImages(t *testing.T) {
	local, err := LocalImages()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]appsv1.Deployment{}
	for _, d := range deployments(t, kindRender(t)) {
		byName[d.Name] = d
	}
	for name, want := range map[string]struct {
		image string
		args  []string
	}{
		"ml-platform-trainingjob-operator": {image: "ml-platform/trainingjob-operator:0.1.0"},
		"ml-platform-notebook-operator":    {image: "ml-platform/notebook-operator:0.1.0"},
		"ml-platform-featurestore-operator": {
			image: "ml-platform/featurestore-operator:0.1.0",
			args: []string{
				"--managed-postgres-image=localhost/ml-platform/postgres:15",
				"--managed-redis-image=localhost/ml-platform/redis:7.0",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, ok := byName[name]
			if !ok {
				t.Fatalf("no Deployment %s in the render", name)
			}
			c := d.Spec.Template.Spec.Containers[0]
			if c.Image != want.image {
				t.Errorf("image %q, want %q", c.Image, want.image)
			}
			if !slices.Contains(local, c.Image) {
				t.Errorf("image %q is not one of the locally built images %v", c.Image, local)
			}
			// Nothing can be pulled on the offline cluster: Never reports a
			// missing image at once.
			if c.ImagePullPolicy != corev1.PullNever {
				t.Errorf("imagePullPolicy %q, want Never", c.ImagePullPolicy)
			}
			for _, arg := range want.args {
				if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, arg) }) {
					t.Errorf("no argument %q in %q", arg, c.Args)
				}
			}
		})
	}
	// The quickstart runs TrainingJobs on the native backend: no
	// Kubeflow training-operator.
	if len(byName) != 3 {
		t.Errorf("%d Deployments in the render, want the three operators", len(byName))
	}
}

func TestKindRenderHasEveryCRD(t *testing.T) {
	var got []string
	for _, obj := range objects(t, kindRender(t)) {
		if obj.kind == "CustomResourceDefinition" {
			got = append(got, obj.name)
		}
	}
	sort.Strings(got)
	want := []string{
		"featurestorebackends.features.mlplatform.dev",
		"featurestores.features.mlplatform.dev",
		"notebooks.notebooks.mlplatform.dev",
		"trainingjobs.training.mlplatform.dev",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRDs (-want +got):\n%s", diff)
	}
}

// TestKindRenderNamesOnlyLocalImages parses every image reference in the
// render: fields named image or ...Image, arguments --...-image=, and the
// same inside ConfigMap data that is YAML. The offline cluster can run
// nothing else.
func TestKindRenderNamesOnlyLocalImages(t *testing.T) {
	local, err := LocalImages()
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string][]string{}
	for _, obj := range objects(t, kindRender(t)) {
		where := obj.kind + "/" + obj.name
		// CRD schemas describe image fields; they name none.
		if obj.kind == "CustomResourceDefinition" {
			continue
		}
		imageRefs(obj.content, func(ref string) { refs[ref] = append(refs[ref], where) })
	}
	if len(refs) == 0 {
		t.Fatal("no image reference found in the render")
	}
	for ref, where := range refs {
		if !slices.Contains(local, ref) && !strings.HasPrefix(ref, BusyboxPrefix) {
			t.Errorf("%v refer to %q, which is not a locally built image (%v, %s*)", where, ref, local, BusyboxPrefix)
		}
	}
	// The quickstart's values must reach the cluster: these are set in
	// values-kind.yaml and nowhere else.
	for _, ref := range []string{
		"localhost/ml-platform/jupyter:1.23",
		"localhost/ml-platform/postgres:15",
		"localhost/ml-platform/redis:7.0",
	} {
		if _, ok := refs[ref]; !ok {
			t.Errorf("the render does not refer to %q", ref)
		}
	}
}

// imageRefs calls found with every image reference in v, a decoded YAML
// value. Go templates the training-operator fills in ({{...}}) are skipped.
func imageRefs(v any, found func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && (k == "image" || strings.HasSuffix(k, "Image")) {
				if !strings.Contains(s, "{{") {
					found(s)
				}
				continue
			}
			imageRefs(e, found)
		}
	case []any:
		for _, e := range v {
			imageRefs(e, found)
		}
	case string:
		if strings.HasPrefix(v, "--") {
			if flag, ref, ok := strings.Cut(v, "="); ok && strings.HasSuffix(flag, "-image") {
				found(ref)
			}
			return
		}
		// ConfigMap data: configuration files, some of them YAML.
		if strings.Contains(v, "\n") {
			var doc any
			if yaml.Unmarshal([]byte(v), &doc) == nil {
				imageRefs(doc, found)
			}
		}
	}
}

type object struct {
	kind, name string
	content    map[string]any
}

func objects(t *testing.T, manifest string) []object {
	t.Helper()
	var out []object
	for _, doc := range charttest.Documents(manifest) {
		var content map[string]any
		if err := yaml.Unmarshal([]byte(doc), &content); err != nil {
			t.Fatalf("render: %v\n%s", err, doc)
		}
		if content == nil {
			continue
		}
		meta, _ := content["metadata"].(map[string]any)
		kind, _ := content["kind"].(string)
		name, _ := meta["name"].(string)
		out = append(out, object{kind: kind, name: name, content: content})
	}
	return out
}

func deployments(t *testing.T, manifest string) []appsv1.Deployment {
	t.Helper()
	var out []appsv1.Deployment
	for _, doc := range charttest.Documents(manifest) {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatalf("render: %v\n%s", err, doc)
		}
		if d.Kind == "Deployment" {
			out = append(out, d)
		}
	}
	return out
}
