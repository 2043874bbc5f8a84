package platform

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// kubectl runs the real kubectl against the test API server.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(testenv.BinaryDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

func apply(t *testing.T, manifest string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, "apply", "--server-side", "-f", path); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// documentedResources finds every resource a kubectl command in our docs,
// NOTES and samples names (get, wait, describe, annotate, delete).
func documentedResources(t *testing.T) map[string][]string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"README.md", "charts/*/README.md", "charts/*/templates/*.txt", "charts/*/templates/_notes.tpl", "deploy/*/README.md", "deploy/samples/*.yaml", "hack/quickstart/*.sh", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	command := regexp.MustCompile(`kubectl(?: -n [^ ]+)? (?:get|wait|describe|annotate|delete|explain)((?: --?[a-z-]+(?:=[^ ]+)?)*) ([a-zA-Z.,/-]+)`)
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range command.FindAllStringSubmatch(string(b), -1) {
			for _, res := range strings.Split(strings.SplitN(m[2], "/", 2)[0], ",") {
				out[res] = append(out[res], filepath.Base(f))
			}
		}
	}
	return out
}

// TestDocumentedCommandsReachOurAPIs runs kubectl on an API server that
// also serves notebooks.kubeflow.org and featurestores.feast.dev: every
// resource name in our docs, and every short name, must reach our API and
// nothing else.
func TestDocumentedCommandsReachOurAPIs(t *testing.T) {
	ns := "names"
	if _, err := kubectl(t, "create", "namespace", ns); err != nil {
		t.Fatal(err)
	}
	apply(t, `
apiVersion: notebooks.mlplatform.dev/v1alpha1
kind: Notebook
metadata: {name: ours, namespace: names}
spec: {}
---
apiVersion: kubeflow.org/v1
kind: Notebook
metadata: {name: kubeflows, namespace: names}
---
apiVersion: feast.dev/v1alpha1
kind: FeatureStore
metadata: {name: feasts, namespace: names}
`)
	ours := map[string]string{
		"trainingjobs.training.mlplatform.dev":  "training.mlplatform.dev",
		"mltj":                                  "training.mlplatform.dev",
		"notebooks.notebooks.mlplatform.dev":    "notebooks.mlplatform.dev",
		"mlnb":                                  "notebooks.mlplatform.dev",
		"featurestores.features.mlplatform.dev": "features.mlplatform.dev",
		"mlfs":                                  "features.mlplatform.dev",
		"featurestorebackends.features.mlplatform.dev": "features.mlplatform.dev",
		"mlfsb": "features.mlplatform.dev",
	}
	docs := documentedResources(t)
	if len(docs) == 0 {
		t.Fatal("found no kubectl command in the docs")
	}
	for res, where := range docs {
		if res == "mlplatform" || res == "secret" || res == "deployments" || res == "namespace" || res == "pods" || res == "crd" {
			continue
		}
		if _, ok := ours[res]; !ok {
			t.Errorf("%v: kubectl names %q, which is not one of our unambiguous names or short names", where, res)
		}
	}
	for res, group := range ours {
		t.Run(res, func(t *testing.T) {
			// kubectl explain names the group it resolved the resource to.
			out, err := explain(t, res)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "GROUP:      "+group) {
				t.Errorf("kubectl explain %s resolved to another API:\n%s", res, firstLines(out, 3))
			}
		})
	}
	for _, res := range []string{"notebooks.notebooks.mlplatform.dev", "mlnb"} {
		out, err := kubectl(t, "get", res, "-n", ns, "-o", "name")
		if err != nil || strings.TrimSpace(out) != "notebook.notebooks.mlplatform.dev/ours" {
			t.Errorf("kubectl get %s: %q, %v", res, out, err)
		}
	}
	out, err := kubectl(t, "get", "mlplatform", "-n", ns, "-o", "name")
	if err != nil || strings.TrimSpace(out) != "notebook.notebooks.mlplatform.dev/ours" {
		t.Errorf("kubectl get mlplatform: %q, %v", out, err)
	}
}

// TestShortNamesAreUnique checks our short names against every resource
// the API server serves (built-in kinds, Kubeflow's and Feast's).
func TestShortNamesAreUnique(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string][]string{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			for _, n := range append([]string{r.Name, r.SingularName}, r.ShortNames...) {
				if n != "" {
					owners[n] = append(owners[n], r.Name+"."+l.GroupVersion)
				}
			}
		}
	}
	for _, sn := range []string{"mltj", "mlnb", "mlfs", "mlfsb"} {
		if len(owners[sn]) != 1 || !strings.Contains(owners[sn][0], "mlplatform.dev") {
			t.Errorf("short name %s belongs to %v, want exactly one of ours", sn, owners[sn])
		}
	}
}

// TestEveryCRDFieldHasADescription walks the generated CRDs: `kubectl
// explain` shows every field's description, and an empty one leaves users
// guessing.
func TestEveryCRDFieldHasADescription(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "charts", "*", "files", "crds", "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("CRDs: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			var missing []string
			walk(v.Schema.OpenAPIV3Schema, crd.Spec.Names.Kind, &missing)
			for _, m := range missing {
				t.Errorf("%s %s: %s has no description", filepath.Base(f), v.Name, m)
			}
		}
	}
}

func walk(s *apiextensionsv1.JSONSchemaProps, path string, missing *[]string) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		child := path + "." + name
		// metadata is described by Kubernetes itself (ObjectMeta).
		if strings.TrimSpace(p.Description) == "" && (strings.Count(child, ".") != 1 || name != "metadata") {
			*missing = append(*missing, child)
		}
		walk(&p, child, missing)
	}
	if s.Items != nil {
		walk(s.Items.Schema, path+"[]", missing)
	}
	if s.AdditionalProperties != nil {
		walk(s.AdditionalProperties.Schema, path+"{}", missing)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// explain runs kubectl explain, waiting up to a minute for the resource's
// schema: the API server publishes a CRD's OpenAPI a moment after the CRD
// is established (longer on a loaded machine), and explain cannot find the
// resource until then.
func explain(t *testing.T, res string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := kubectl(t, "explain", res)
		if err == nil || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}
