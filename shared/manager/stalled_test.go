package manager

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestOnlyTheLeaderCountsStalledObjects: the Stalled objects metric counts
// from the manager's cache, which starts an informer for any kind it is
// asked to list. A cold standby that Prometheus scrapes must start none:
// it would hold and watch every object of the operator's kinds, which it
// is meant not to, and the scrape would wait for them to sync. The
// standby reports no series; a replica that leads does.
func TestOnlyTheLeaderCountsStalledObjects(t *testing.T) {
	const name = "stalled-metric-test-operator"
	scheme, err := NewScheme(samplev1alpha1.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.NewClient(t, env.Config, scheme)
	ns := createNamespace(t, adminClientset(t), "stalled")
	w := &samplev1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck"}}
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	w.Status.Conditions = []metav1.Condition{{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "Test", Message: "m", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	series := `mlplatform_objects_stalled{kind="Widget",namespace="` + ns + `"} 1`
	httpClient := &http.Client{Timeout: 10 * time.Second}

	cfg := withLeader(t, name, "stalled-election")
	var widgetRequests atomic.Int32
	restConfig := rest.CopyConfig(env.Config)
	restConfig.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/widgets") {
				widgetRequests.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	cfg.RESTConfig = restConfig
	standby, url := startScraped(t, httpClient, cfg, Options{Name: name, Scheme: scheme})
	// The cache starts on every replica, before the election: an informer
	// the scrape asked for would start at once.
	if !standby.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("the standby's cache did not start")
	}
	if status, body := get(t, httpClient, url, ""); status != http.StatusOK || strings.Contains(body, "mlplatform_objects_stalled{") {
		t.Errorf("the standby's scrape answered %d with Stalled objects:\n%s", status, grepLines(body, "mlplatform_objects_stalled"))
	}
	if n := widgetRequests.Load(); n != 0 {
		t.Errorf("scraping the standby made %d requests for Widgets: its cache started an informer", n)
	}
	if isClosed(standby.Elected()) {
		t.Fatal("the standby leads: the test proves nothing")
	}

	_, url = startScraped(t, httpClient, testConfig(t), Options{Name: name, Scheme: scheme})
	eventually(t, "the leader counts the Stalled Widget", func(context.Context) (bool, error) {
		_, body := get(t, httpClient, url, "")
		return strings.Contains(body, series), nil
	})
}

// startScraped starts a manager from cfg and opts that serves its metrics
// without authentication, and returns it with the metrics' URL once it
// serves them.
func startScraped(t *testing.T, c *http.Client, cfg Config, opts Options) (ctrl.Manager, string) {
	t.Helper()
	cfg.MetricsSecure = false
	cfg.MetricsBindAddress = freeAddr(t)
	mgr, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	url := "http://" + cfg.MetricsBindAddress + "/metrics"
	waitServing(t, c, url)
	return mgr, url
}

// grepLines is the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
