package charttest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

const demo = "testdata/demo"

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

func TestLintAndRender(t *testing.T) {
	if err := Lint(demo, nil); err != nil {
		t.Fatalf("lint: %v", err)
	}
	out, err := Render(demo, "r", "ns", map[string]any{"configMaps": 3, "enabled": true, "global": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(Documents(out)); n != 6 {
		t.Errorf("rendered %d documents, want 6:\n%s", n, out)
	}
	_, err = Render(demo, "r", "ns", map[string]any{"bogus": 1})
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("an unknown value key must be rejected by the schema, got %v", err)
	}
	if err := Lint(demo, map[string]any{"configMaps": "many"}); err == nil {
		t.Error("lint must fail on values the schema rejects")
	}
}

func TestInstallAndImpersonate(t *testing.T) {
	rel, err := Install(env.Config, demo, "demo", "charttest", map[string]any{"configMaps": 2}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Info.Status != "deployed" {
		t.Fatalf("release status %s", rel.Info.Status)
	}
	cs, err := kubernetes.NewForConfig(ImpersonateServiceAccount(env.Config, "charttest", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("charttest").Get(t.Context(), "demo-1", metav1.GetOptions{}); err != nil {
		t.Errorf("the chart's ServiceAccount may get ConfigMaps: %v", err)
	}
	_, err = cs.CoreV1().ConfigMaps("charttest").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the chart grants no create, got %v", err)
	}
	if err := Uninstall(env.Config, "demo", "charttest", t.Logf); err != nil {
		t.Fatal(err)
	}
}
