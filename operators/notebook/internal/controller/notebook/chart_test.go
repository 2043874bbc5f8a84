package notebook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/shared/charttest"
)

func chartDir() string { return filepath.Join(repoRoot(), "charts", "notebook-operator") }

func TestChartLints(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults": nil,
		"everything on": {
			"metrics":   map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			"notebooks": map[string]any{"ingress": map[string]any{"enabled": true, "host": "nb.example.com", "tlsSecretName": "tls"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := charttest.Lint(chartDir(), values); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestChartSchemaRejectsUnknownKeys(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"top level":              {"bogus": true},
		"nested":                 {"notebooks": map[string]any{"culling": map[string]any{"idleTimout": "1h"}}},
		"bad duration":           {"notebooks": map[string]any{"reportInterval": "ten minutes"}},
		"ingress without a host": {"notebooks": map[string]any{"ingress": map[string]any{"enabled": true}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := charttest.Render(chartDir(), "nb", "mlp-system", values); err == nil {
				t.Fatal("the chart accepted invalid values")
			}
		})
	}
	// The umbrella chart passes these.
	if _, err := charttest.Render(chartDir(), "nb", "mlp-system", map[string]any{"enabled": true, "global": map[string]any{"x": 1}}); err != nil {
		t.Fatal(err)
	}
}

// TestChartConfigLoads feeds the rendered configuration to the operator's
// own loader, which refuses unknown keys: chart and operator agree.
func TestChartConfigLoads(t *testing.T) {
	manifest, err := charttest.Render(chartDir(), "nb", "mlp-system", map[string]any{
		"notebooks": map[string]any{"culling": map[string]any{"idleTimeout": "2h"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var cm *corev1.ConfigMap
	var crdKept bool
	for _, doc := range charttest.Documents(manifest) {
		if strings.Contains(doc, "kind: CustomResourceDefinition") && strings.Contains(doc, "helm.sh/resource-policy: keep") {
			crdKept = true
		}
		if !strings.Contains(doc, "kind: ConfigMap") {
			continue
		}
		cm = &corev1.ConfigMap{}
		if err := yaml.Unmarshal([]byte(doc), cm); err != nil {
			t.Fatal(err)
		}
	}
	if cm == nil || !crdKept {
		t.Fatalf("rendered ConfigMap %v, CRD with keep %v", cm != nil, crdKept)
	}
	dir := t.TempDir()
	for _, key := range []string{"config.yaml", "accelerators.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(cm.Data[key]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Culling.IdleTimeout.Hours() != 2 || cfg.NetworkPolicy.OperatorNamespace != "mlp-system" || cfg.NetworkPolicy.OperatorPodLabels["app.kubernetes.io/name"] != "notebook-operator" {
		t.Errorf("loaded configuration %+v", cfg)
	}
}

// TestChartInstallsAndItsServiceAccountSuffices installs the chart with the
// Helm SDK and runs integration tests with the operator impersonating the
// chart's ServiceAccount, so the generated RBAC is exactly enough.
func TestChartInstallsAndItsServiceAccountSuffices(t *testing.T) {
	const release, ns = "notebook-operator", "mlp-notebook-system"
	// The CRD is installed by the test environment already.
	if _, err := charttest.Install(env.Config, chartDir(), release, ns, map[string]any{"crds": map[string]any{"enabled": false}}, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = charttest.Uninstall(env.Config, release, ns, t.Logf) })

	operatorConfig = charttest.ImpersonateServiceAccount(env.Config, ns, release)
	defer func() { operatorConfig = nil }()
	for name, test := range map[string]func(*testing.T){
		"OwnedObjectsAndReady":            TestOwnedObjectsAndReady,
		"SuspendAndResume":                TestSuspendAndResume,
		"CullingWarnsCullsAndRestarts":    TestCullingWarnsCullsAndRestarts,
		"PodStartFailureIsReported":       TestPodStartFailureIsReported,
		"QuotaRejectionIsReported":        TestQuotaRejectionIsReported,
		"MissingFeatureStoreDoesNotBlock": TestMissingFeatureStoreDoesNotBlock,
	} {
		t.Run(name, test)
	}
}
