package healthtest

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/shared/health"
)

// update rewrites the health tables' golden files: go test -run Health -update-health.
var update = flag.Bool("update-health", false, "rewrite the health tables' golden files")

// Table collects, per state of one kind, what kstatus, the shipped Argo CD
// health check and `kubectl get` (the CRD's printer columns, as the API
// server's table convertor computes them for kubectl) say of an object.
type Table struct {
	kind    string
	columns []apiextensionsv1.CustomResourceColumnDefinition
	rows    map[string]string
}

// NewTable reads the printer columns of kind from the CRD file crdPath.
// Columns of type date (Age, Last Activity) are left out: they print the
// time since, which no golden file can hold.
func NewTable(t testing.TB, crdPath string) *Table {
	t.Helper()
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatalf("%s: %v", crdPath, err)
	}
	tb := &Table{kind: crd.Spec.Names.Kind, rows: map[string]string{}}
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		for _, c := range v.AdditionalPrinterColumns {
			if c.Type != "date" {
				tb.columns = append(tb.columns, c)
			}
		}
	}
	return tb
}

// Add records the row of obj in the named state.
func (tb *Table) Add(t testing.TB, state string, obj runtime.Object) {
	t.Helper()
	ks, err := health.Kstatus(obj)
	if err != nil {
		t.Fatal(err)
	}
	argo, err := health.ArgoCD(obj)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := tableconvertor.New(tb.columns)
	if err != nil {
		t.Fatal(err)
	}
	table, err := conv.ConvertToTable(context.Background(), obj, &metav1.TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cells := []string{tb.kind + " " + state, string(ks.Status), argo.Status, trueConditions(t, obj)}
	for i := range tb.columns {
		// Cell 0 is the name; a nil cell is what kubectl prints as <none>.
		cell := table.Rows[0].Cells[i+1]
		if cell == nil {
			cells = append(cells, "<none>")
		} else {
			cells = append(cells, fmt.Sprint(cell))
		}
	}
	tb.rows[state] = "| " + strings.Join(cells, " | ") + " |"
}

// Markdown renders the table, its rows sorted by state so that tests
// that range over a map produce the same file.
func (tb *Table) Markdown() string {
	head := []string{"object, state", "kstatus", "Argo CD", "conditions True (kubectl wait)"}
	for _, c := range tb.columns {
		head = append(head, "`kubectl get` "+c.Name)
	}
	sep := strings.Repeat("|---", len(head)) + "|"
	var rows []string
	for _, state := range slices.Sorted(maps.Keys(tb.rows)) {
		rows = append(rows, tb.rows[state])
	}
	return "| " + strings.Join(head, " | ") + " |\n" + sep + "\n" + strings.Join(rows, "\n") + "\n"
}

// Golden logs the table (go test -v shows it) and compares it with the
// golden file, which -update-health rewrites.
func (tb *Table) Golden(t testing.TB, path string) {
	t.Helper()
	got := tb.Markdown()
	t.Logf("What kstatus, Argo CD and kubectl get say of a %s:\n%s", tb.kind, got)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update-health writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date (go test -update-health rewrites it); got:\n%s", path, got)
	}
}

// trueConditions lists the types of the conditions that are True, the ones
// kubectl wait --for=condition=X returns on.
func trueConditions(t testing.TB, obj runtime.Object) string {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(u, "status", "conditions")
	var out []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["status"] == string(metav1.ConditionTrue) {
			out = append(out, fmt.Sprint(m["type"]))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}
