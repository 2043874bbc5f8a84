package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-platform/ml-platform/shared/metrics"
)

// testMetric proves that collectors made with the metrics package are served
// on the manager's endpoint.
const testMetric = "mlplatform_managertest_setups_total"

func setupWithMetric(ctrl.Manager, Config) error {
	metrics.NewCounterVec("managertest", "setups_total", "Setups run by the manager test.").WithLabelValues().Inc()
	return nil
}

func TestSecureMetricsRequireAuthorizedToken(t *testing.T) {
	cs := adminClientset(t)
	ns := createNamespace(t, cs, "metrics")
	allowedToken := serviceAccountToken(t, cs, ns, "scraper")
	deniedToken := serviceAccountToken(t, cs, ns, "bystander")
	allowMetricsGet(t, cs, ns, "scraper")

	cfg := testConfig(t)
	cfg.MetricsSecure = true
	cfg.MetricsBindAddress = freeAddr(t)
	mgr, err := New(cfg, Options{Name: "metrics-test-operator", Setup: setupWithMetric})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	url := "https://" + cfg.MetricsBindAddress + "/metrics"
	// The endpoint's certificate is self-signed; what is checked here is
	// who may read it, not the certificate.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	waitServing(t, httpClient, url)

	testCases := map[string]struct {
		token      string
		wantStatus int
	}{
		"no token":                       {wantStatus: http.StatusUnauthorized},
		"token without RBAC for metrics": {token: deniedToken, wantStatus: http.StatusForbidden},
		"token allowed to get /metrics":  {token: allowedToken, wantStatus: http.StatusOK},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			status, body := get(t, httpClient, url, tc.token)
			if status != tc.wantStatus {
				t.Fatalf("GET %s = %d, want %d; body:\n%.500s", url, status, tc.wantStatus, body)
			}
			if tc.wantStatus == http.StatusOK && !strings.Contains(body, testMetric) {
				t.Errorf("metrics body lacks %s", testMetric)
			}
			if tc.wantStatus != http.StatusOK && strings.Contains(body, testMetric) {
				t.Errorf("metrics leaked to a caller answered %d", status)
			}
		})
	}
}

func TestInsecureMetricsAndHealthProbes(t *testing.T) {
	cfg := testConfig(t)
	cfg.MetricsSecure = false
	cfg.MetricsBindAddress = freeAddr(t)
	cfg.HealthProbeBindAddress = freeAddr(t)
	mgr, err := New(cfg, Options{Name: "insecure-metrics-test-operator", Setup: setupWithMetric})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	httpClient := &http.Client{Timeout: 10 * time.Second}
	metricsURL := "http://" + cfg.MetricsBindAddress + "/metrics"
	waitServing(t, httpClient, metricsURL)

	testCases := map[string]struct {
		url          string
		wantContains string
	}{
		"metrics without a token": {url: metricsURL, wantContains: testMetric},
		"liveness":                {url: "http://" + cfg.HealthProbeBindAddress + "/healthz", wantContains: "ok"},
		"readiness":               {url: "http://" + cfg.HealthProbeBindAddress + "/readyz", wantContains: "ok"},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			waitServing(t, httpClient, tc.url)
			status, body := get(t, httpClient, tc.url, "")
			if status != http.StatusOK || !strings.Contains(body, tc.wantContains) {
				t.Errorf("GET %s = %d with body %.300q, want 200 containing %q", tc.url, status, body, tc.wantContains)
			}
		})
	}
}

func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// allowMetricsGet grants what a Prometheus scraper gets in a cluster: get on
// the non-resource URL /metrics.
func allowMetricsGet(t *testing.T, cs kubernetes.Interface, ns, serviceAccount string) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	role, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: serviceAccount}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
}

// waitServing waits until the server answers at all, whatever the status.
func waitServing(t *testing.T, c *http.Client, url string) {
	t.Helper()
	eventually(t, "server at "+url+" answers", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := c.Do(req)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return false, err
			}
			return false, nil
		}
		_ = resp.Body.Close()
		return true, nil
	})
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
