package platform

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// libraryMetrics are the metrics the rules and dashboards use that come
// from libraries, with the name as it appears in the library's source:
// Prometheus' own up, and controller-runtime's reconcile and leader
// election metrics (pkg/internal/controller/metrics, pkg/metrics/leaderelection.go).
var libraryMetrics = map[string]string{
	"up":                                 "",
	"controller_runtime_reconcile_total": "controller_runtime_reconcile_total",
	"controller_runtime_reconcile_errors_total": "controller_runtime_reconcile_errors_total",
	"leader_election_master_status":             "leader_election_master_status",
}

// exportedMetrics parses the operators' and shared libraries' Go code for
// the metrics they define through shared/metrics.
func exportedMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range []string{"operators", "shared"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			goFiles, err := filepath.Glob(filepath.Join(path, "*.go"))
			if err != nil {
				return err
			}
			var files []*ast.File
			for _, f := range goFiles {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
				if err != nil {
					return err
				}
				files = append(files, parsed)
			}
			collectMetrics(files, path, out)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func collectMetrics(files []*ast.File, dir string, out map[string]string) {
	consts := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
			return true
		})
	}
	str := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.Ident:
			s, ok := consts[e.Name]
			return s, ok
		case *ast.BinaryExpr:
			// metrics.Namespace + "_objects_stalled" in shared/metrics.
			if id, ok := e.X.(*ast.Ident); ok && id.Name == "Namespace" {
				if lit, ok := e.Y.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					return "mlplatform" + s, true
				}
			}
		}
		return "", false
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "NewCounterVec", "NewGaugeVec", "NewHistogramVec":
				if len(call.Args) < 2 {
					return true
				}
				sub, ok1 := str(call.Args[0])
				name, ok2 := str(call.Args[1])
				if !ok1 || !ok2 {
					return true
				}
				full := "mlplatform_" + sub + "_" + name
				out[full] = dir
				if sel.Sel.Name == "NewHistogramVec" {
					for _, s := range []string{"_bucket", "_count", "_sum"} {
						out[full+s] = dir
					}
				}
			case "NewCountCollector":
				// metrics.NewCountCollector(reader, newList, name, ...).
				if len(call.Args) > 2 {
					if name, ok := str(call.Args[2]); ok {
						out[name] = dir
					}
				}
			case "NewDesc":
				if len(call.Args) > 0 {
					if name, ok := str(call.Args[0]); ok {
						out[name] = dir
					}
				}
			}
			return true
		})
	}
}

var selectorMetric = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)

// usedMetrics renders every chart with its rules and dashboards and
// returns each metric an expression selects, with where it is used.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	on := map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true}, "dashboards": map[string]any{"enabled": true}}}
	for _, chart := range operatorCharts {
		objs := objects(t, chartDir(chart), on)
		_, rules := renderRules(t, chart, on)
		for name, r := range rules {
			for _, m := range selectorMetric.FindAllStringSubmatch(r.Expr, -1) {
				used[m[1]] = append(used[m[1]], chart+" alert "+name)
			}
		}
		cm := find(t, objs, "ConfigMap", "-dashboards")
		data := field(t, cm, "data").(map[string]any)
		if len(data) == 0 {
			t.Errorf("%s: the dashboards ConfigMap is empty", chart)
		}
		for file, raw := range data {
			var d struct {
				Panels []struct {
					Title   string `json:"title"`
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
			}
			if err := json.Unmarshal([]byte(raw.(string)), &d); err != nil {
				t.Fatalf("%s %s: %v", chart, file, err)
			}
			if len(d.Panels) == 0 {
				t.Errorf("%s %s has no panels", chart, file)
			}
			for _, p := range d.Panels {
				for _, target := range p.Targets {
					for _, m := range selectorMetric.FindAllStringSubmatch(target.Expr, -1) {
						used[m[1]] = append(used[m[1]], chart+" panel "+p.Title)
					}
				}
			}
		}
		if got := cm.GetLabels()["grafana_dashboard"]; got != "1" {
			t.Errorf("%s: dashboards ConfigMap label grafana_dashboard=%q, want 1", chart, got)
		}
	}
	return used
}

// TestRulesAndDashboardsUseOnlyExportedMetrics checks every metric an alert
// or a dashboard panel selects against the metrics the operators define,
// and the library metrics against the library's source in the module cache.
func TestRulesAndDashboardsUseOnlyExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	if len(exported) < 20 {
		t.Fatalf("found only %d metrics in the operators' code: the parser misses their definitions", len(exported))
	}
	crDir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/controller-runtime").Output()
	if err != nil {
		t.Fatal(err)
	}
	used := usedMetrics(t)
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := exported[name]; ok {
			continue
		}
		needle, ok := libraryMetrics[name]
		if !ok {
			t.Errorf("%s (used by %v) is exported by no operator", name, used[name])
			continue
		}
		if needle != "" {
			out, _ := exec.Command("grep", "-rlF", `"`+needle+`"`, filepath.Join(strings.TrimSpace(string(crDir)), "pkg")).Output()
			if len(out) == 0 {
				t.Errorf("%s (used by %v): controller-runtime no longer defines %q", name, used[name], needle)
			}
		}
	}
}
