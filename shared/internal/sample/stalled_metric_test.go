package sample

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/metrics"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestStalledObjectsMetric counts Widgets with Stalled=True on the real API
// server, and checks that a Widget that recovers or is deleted leaves no
// series behind.
func TestStalledObjectsMetric(t *testing.T) {
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.CreateNamespace(t, c, "stalled")
	other := testenv.CreateNamespace(t, c, "stalled")
	setStalled := func(w *samplev1alpha1.Widget, status metav1.ConditionStatus) {
		t.Helper()
		w.Status.Conditions = []metav1.Condition{{Type: "Stalled", Status: status, Reason: "Test", Message: "m", LastTransitionTime: metav1.Now()}}
		if err := c.Status().Update(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	var widgets []*samplev1alpha1.Widget
	for i, n := range []string{ns, ns, ns, other} {
		w := &samplev1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: n, GenerateName: "w-"}}
		if err := c.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		// The third Widget has Stalled=False: present, but not stalled.
		setStalled(w, map[bool]metav1.ConditionStatus{true: metav1.ConditionFalse, false: metav1.ConditionTrue}[i == 2])
		widgets = append(widgets, w)
	}
	collector := metrics.NewStalledCollector(c, scheme)
	// Other tests of the package may leave Widgets in their namespaces: the
	// comparison keeps to this test's two.
	mine := func() string {
		var out []string
		for _, line := range strings.Split(collectText(t, collector), "\n") {
			if strings.Contains(line, ns) || strings.Contains(line, other) {
				out = append(out, strings.TrimSpace(line))
			}
		}
		return strings.Join(out, "\n")
	}
	want := `mlplatform_objects_stalled{kind="Widget",namespace="` + ns + `"} 2` + "\n" +
		`mlplatform_objects_stalled{kind="Widget",namespace="` + other + `"} 1`
	if got := mine(); got != want && got != reverse(want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	setStalled(widgets[0], metav1.ConditionFalse)
	if err := c.Delete(t.Context(), widgets[3]); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the recovered and the deleted Widget are no longer counted", func(context.Context) (bool, error) {
		return mine() == `mlplatform_objects_stalled{kind="Widget",namespace="`+ns+`"} 1`, nil
	})
}

func reverse(two string) string {
	lines := strings.SplitN(two, "\n", 2)
	return lines[1] + "\n" + lines[0]
}

func collectText(t *testing.T, c *metrics.StalledCollector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			lines = append(lines, fmt.Sprintf("%s{kind=%q,namespace=%q} %g", f.GetName(), labels["kind"], labels["namespace"], m.GetGauge().GetValue()))
		}
	}
	return strings.Join(lines, "\n")
}
