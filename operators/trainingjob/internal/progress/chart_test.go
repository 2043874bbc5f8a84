package progress_test

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		"--progress-cert-dir=/etc/progress-tls",
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
	s := renderedSecret(t, out)
	if s == nil {
		t.Fatal("no generated progress Secret")
	}
	certs := map[string]*x509.Certificate{}
	for _, key := range []string{"tls.crt", "ca.crt"} {
		der, _ := pem.Decode(s.Data[key])
		if der == nil {
			t.Fatalf("%s is not PEM", key)
		}
		c, err := x509.ParseCertificate(der.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs[key] = c
	}
	pool := x509.NewCertPool()
	pool.AddCert(certs["ca.crt"])
	if _, err := certs["tls.crt"].Verify(x509.VerifyOptions{DNSName: "r-trainingjob-operator-progress.mlp-system.svc", Roots: pool}); err != nil {
		t.Errorf("the generated certificate does not serve the Service's name: %v", err)
	}
	if len(s.Data["tls.key"]) == 0 {
		t.Error("no tls.key")
	}
}

func TestChartProgressValues(t *testing.T) {
	own, err := charttest.Render(chartDir(), "r", "ns", map[string]any{"progress": map[string]any{"certificate": map[string]any{"secretName": "my-cert"}}})
	if err != nil {
		t.Fatal(err)
	}
	if renderedSecret(t, own) != nil || !strings.Contains(own, "secretName: my-cert") {
		t.Error("certificate.secretName must replace the generated Secret")
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
	} {
		if _, err := charttest.Render(chartDir(), "r", "ns", values); err == nil {
			t.Errorf("%s: values accepted", name)
		}
	}
	if err := charttest.Lint(chartDir(), map[string]any{"progress": map[string]any{"allRanks": true}}); err != nil {
		t.Error(err)
	}
}
