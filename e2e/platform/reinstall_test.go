package platform

import (
	"strings"
	"testing"

	"github.com/ml-platform/ml-platform/shared/charttest"
)

// handOverCRDs is the command the umbrella README documents for installing
// under another release name or namespace after an uninstall kept the CRDs.
func handOverCRDs(t *testing.T, release, namespace string) {
	t.Helper()
	args := []string{"label", "crd", "-l", "app.kubernetes.io/part-of=ml-platform", "app.kubernetes.io/managed-by=Helm", "--overwrite"}
	if out, err := kubectl(t, args...); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	args = []string{"annotate", "crd", "-l", "app.kubernetes.io/part-of=ml-platform", "meta.helm.sh/release-name=" + release, "meta.helm.sh/release-namespace=" + namespace, "--overwrite"}
	if out, err := kubectl(t, args...); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestReinstallUnderAnotherReleaseAfterUninstall installs the umbrella,
// uninstalls it (the CRDs stay), and installs it under another release
// name and namespace: Helm refuses until the CRDs are handed over with the
// documented command, then installs.
func TestReinstallUnderAnotherReleaseAfterUninstall(t *testing.T) {
	// The test API server installed the CRDs without Helm, as a GitOps
	// tool or an earlier install by hand would: the label marks them ours.
	if out, err := kubectl(t, "label", "crd", "trainingjobs.training.mlplatform.dev", "notebooks.notebooks.mlplatform.dev",
		"featurestores.features.mlplatform.dev", "featurestorebackends.features.mlplatform.dev", "app.kubernetes.io/part-of=ml-platform", "--overwrite"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	handOverCRDs(t, "first", "mlp-first")
	if _, err := charttest.Install(env.Config, umbrella, "first", "mlp-first", nil, t.Logf); err != nil {
		t.Fatalf("installing the first release: %v", err)
	}
	if err := charttest.Uninstall(env.Config, "first", "mlp-first", t.Logf); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, "get", "crd", "notebooks.notebooks.mlplatform.dev", "-o", "name"); err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("the uninstall deleted the CRDs: %v", err)
	}

	_, err := charttest.Install(env.Config, umbrella, "second", "mlp-second", nil, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "meta.helm.sh/release-name") {
		t.Fatalf("installing under another name over kept CRDs: %v, want Helm's ownership error (the documented case)", err)
	}
	handOverCRDs(t, "second", "mlp-second")
	if _, err := charttest.Install(env.Config, umbrella, "second", "mlp-second", nil, t.Logf); err != nil {
		t.Fatalf("installing after the documented hand-over: %v", err)
	}
	t.Cleanup(func() { _ = charttest.Uninstall(env.Config, "second", "mlp-second", t.Logf) })
}
