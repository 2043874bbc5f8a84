package platform

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// kueueFrameworks are the Kueue integrations the platform needs: batch/job
// (native TrainingJobs), the Kubeflow jobs (backend: kubeflow), pod and
// statefulset (Notebooks).
var kueueFrameworks = []string{
	"batch/job", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob", "pod", "statefulset",
}

// TestUmbrellaInstallsKueueOnlyWhenAsked: by default the umbrella renders
// nothing of Kueue; kueue.enabled renders Kueue's own chart (its CRDs,
// controller manager and webhooks) with the platform's integrations, and
// the kind values point it at the image built from tools/kueue.
func TestUmbrellaInstallsKueueOnlyWhenAsked(t *testing.T) {
	for _, o := range objects(t, umbrella, nil) {
		if strings.Contains(o.GetName(), "kueue") || strings.HasSuffix(o.GetName(), ".kueue.x-k8s.io") {
			t.Errorf("kueue.enabled is off by default, yet the umbrella renders %s %s", o.GetKind(), o.GetName())
		}
	}

	kind := map[string]any{}
	raw, err := os.ReadFile(filepath.Join(umbrella, "values-kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &kind); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(kind, true, "kueue", "enabled"); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, umbrella, kind)
	if n := countCRDs(objs, "kueue.x-k8s.io"); n < 5 {
		t.Errorf("kueue.enabled renders %d of Kueue's CRDs", n)
	}
	deployment := find(t, objs, "Deployment", "kueue-controller-manager")
	containers := field(t, deployment, "spec", "template", "spec", "containers").([]any)
	if image := containers[0].(map[string]any)["image"]; image != "localhost/ml-platform/kueue:v0.17.0" {
		t.Errorf("Kueue's image on kind is %v, want the one built from tools/kueue", image)
	}
	config := find(t, objs, "ConfigMap", "kueue-manager-config")
	var cfg struct {
		Integrations struct {
			Frameworks []string `json:"frameworks"`
		} `json:"integrations"`
	}
	if err := yaml.Unmarshal([]byte(field(t, config, "data", "controller_manager_config.yaml").(string)), &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Integrations.Frameworks, kueueFrameworks) {
		t.Errorf("Kueue's integrations are %v, want %v", cfg.Integrations.Frameworks, kueueFrameworks)
	}
	for _, name := range []string{"kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration"} {
		kind := "MutatingWebhookConfiguration"
		if strings.Contains(name, "validating") {
			kind = "ValidatingWebhookConfiguration"
		}
		find(t, objs, kind, name)
	}
}

func countCRDs(objs []*unstructured.Unstructured, group string) int {
	n := 0
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" && strings.HasSuffix(o.GetName(), "."+group) {
			n++
		}
	}
	return n
}
