package progress_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/shared/charttest"
)

func chartDir() string {
	return filepath.Join("..", "..", "..", "..", "charts", "trainingjob-operator")
}

// renderedSecret is the chart's progress Secret, or nil.
func renderedSecret(t *testing.T, manifest string) *corev1.Secret {
	t.Helper()
	for _, doc := range charttest.Documents(manifest) {
		if strings.Contains(doc, "kind: Secret") && strings.Contains(doc, "-progress-tls") {
			var s corev1.Secret
			if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
				t.Fatal(err)
			}
			return &s
		}
	}
	return nil
}

// progressRole is the chart's Role on the progress Secret.
func progressRole(t *testing.T, manifest string) *rbacv1.Role {
	t.Helper()
	for _, doc := range charttest.Documents(manifest) {
		if strings.Contains(doc, "kind: Role\n") && strings.Contains(doc, "-progress-tls") {
			var r rbacv1.Role
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			return &r
		}
	}
	t.Fatal("no Role for the progress Secret")
	return nil
}

// Argo CD and `helm template | kubectl apply` render without the cluster:
// a chart that generated the CA at render time replaced it on every sync.
func TestChartRendersNoKeyMaterial(t *testing.T) {
	render := func() string {
		out, err := charttest.Render(chartDir(), "r", "mlp-system", nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first, second := render(), render()
	if first != second {
		t.Error("two renders of the chart differ")
	}
	if s := renderedSecret(t, first); s != nil {
		t.Error("the chart renders the progress Secret; the operator owns it")
	}
	// PEM blocks, as text and as base64 in a Secret's data.
	for _, material := range []string{"-----BEGIN", "LS0tLS1CRUdJTi", "tls.key:"} {
		if strings.Contains(first, material) {
			t.Errorf("the rendered chart holds %q", material)
		}
	}
	for _, want := range []string{"--progress-secret=mlp-system/r-trainingjob-operator-progress-tls", "--progress-secret-generate=true", "--progress-secret-reload-interval=1m"} {
		if !strings.Contains(first, want) {
			t.Errorf("rendered chart lacks %q", want)
		}
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"r-trainingjob-operator-progress-tls"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}
	if diff := cmp.Diff(want, progressRole(t, first).Rules); diff != "" {
		t.Errorf("the Role on the progress Secret (-want +got):\n%s", diff)
	}
}

func TestChartServesTheProgressEndpoint(t *testing.T) {
	out, err := charttest.Render(chartDir(), "r", "mlp-system", map[string]any{"progress": map[string]any{
		"interval": "30s", "rate": 2, "burst": 4,
		"source":      map[string]any{"rate": 3, "burst": 12, "maxSources": 500},
		"tokenReview": map[string]any{"qps": 7, "burst": 9, "cacheTTL": "90s", "negativeCacheTTL": "5s", "cacheSize": 64},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"--progress-bind-address=:9443",
		"--progress-url=https://r-trainingjob-operator-progress.mlp-system.svc:9443",
		"--progress-interval=30s", "--progress-rate=2", "--progress-burst=4", "--progress-all-ranks=false",
		"--progress-source-rate=3", "--progress-source-burst=12", "--progress-max-sources=500",
		"--progress-tokenreview-qps=7", "--progress-tokenreview-burst=9",
		"--progress-token-cache-ttl=90s", "--progress-token-negative-cache-ttl=5s", "--progress-token-cache-size=64",
		"--progress-namespace=mlp-system", "--progress-advertise-address=$(POD_IP):9443",
		"name: r-trainingjob-operator-progress\n", "targetPort: progress",
		"fieldPath: status.podIP",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart lacks %q", want)
		}
	}
}

func TestChartProgressValues(t *testing.T) {
	own, err := charttest.Render(chartDir(), "r", "ns", map[string]any{"progress": map[string]any{"certificate": map[string]any{"secretName": "my-cert"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(own, "--progress-secret=ns/my-cert") || !strings.Contains(own, "--progress-secret-generate=false") {
		t.Error("certificate.secretName must replace the operator's Secret, which the operator then only reads")
	}
	readOnly := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"my-cert"}, Verbs: []string{"get"}}}
	if diff := cmp.Diff(readOnly, progressRole(t, own).Rules); diff != "" {
		t.Errorf("with certificate.secretName the operator only reads that Secret (-want +got):\n%s", diff)
	}
	off, err := charttest.Render(chartDir(), "r", "ns", map[string]any{"progress": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(off, "--progress-") || strings.Contains(off, "-progress") {
		t.Error("progress.enabled=false still renders the endpoint")
	}
	single, err := charttest.Render(chartDir(), "r", "ns", map[string]any{"leaderElection": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(single, "--progress-namespace") || !strings.Contains(single, "--progress-bind-address") {
		t.Error("without leader election the endpoint runs without the leader record")
	}
	for name, values := range map[string]map[string]any{
		"unknown key":             {"progress": map[string]any{"intervall": "10s"}},
		"zero rate":               {"progress": map[string]any{"rate": 0}},
		"bad interval":            {"progress": map[string]any{"interval": "ten seconds"}},
		"no burst":                {"progress": map[string]any{"burst": 0}},
		"unknown source key":      {"progress": map[string]any{"source": map[string]any{"qps": 1}}},
		"zero source rate":        {"progress": map[string]any{"source": map[string]any{"rate": 0}}},
		"no sources":              {"progress": map[string]any{"source": map[string]any{"maxSources": 0}}},
		"unknown tokenReview key": {"progress": map[string]any{"tokenReview": map[string]any{"ttl": "1m"}}},
		"zero review qps":         {"progress": map[string]any{"tokenReview": map[string]any{"qps": 0}}},
		"bad cache TTL":           {"progress": map[string]any{"tokenReview": map[string]any{"cacheTTL": "two minutes"}}},
		"no cache":                {"progress": map[string]any{"tokenReview": map[string]any{"cacheSize": 0}}},
		"bad reload interval":     {"progress": map[string]any{"certificate": map[string]any{"reloadInterval": "hourly"}}},
	} {
		if _, err := charttest.Render(chartDir(), "r", "ns", values); err == nil {
			t.Errorf("%s: values accepted", name)
		}
	}
	if err := charttest.Lint(chartDir(), map[string]any{"progress": map[string]any{"allRanks": true}}); err != nil {
		t.Error(err)
	}
}
