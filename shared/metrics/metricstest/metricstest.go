// Package metricstest reads metric values in tests and checks that every
// metric an operator defines is asserted by a test of its package.
package metricstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ml-platform/ml-platform/shared/metrics"
)

// Value returns the value of the counter or gauge series name{labels} on
// controller-runtime's registry, 0 when the series does not exist yet. The
// labels must name the series completely.
func Value(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	return ValueFrom(t, ctrlmetrics.Registry, name, labels)
}

// ValueFrom is Value on another gatherer.
func ValueFrom(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	m := series(t, g, name, labels)
	switch {
	case m == nil:
		return 0
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", name, labels)
	return 0
}

// Histogram returns the sample count and sum of the histogram series
// name{labels}, zeros when the series does not exist yet.
func Histogram(t testing.TB, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	m := series(t, ctrlmetrics.Registry, name, labels)
	if m == nil {
		return 0, 0
	}
	if m.GetHistogram() == nil {
		t.Fatalf("%s%v is not a histogram", name, labels)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// Collect registers c alone on a new registry and returns it, for reading
// a collector that is not (or not yet) registered.
func Collect(t testing.TB, c prometheus.Collector) prometheus.Gatherer {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg
}

func series(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m
			}
		}
	}
	return nil
}

// RequireAsserted fails t unless every metric defined through
// shared/metrics in this process, or described by one of collectors (those
// registered only when a manager starts), whose name starts with one of
// prefixes is
// a key of asserted, whose value names the test of the package (in the
// current directory) that asserts it; that test's body must spell the
// metric's name as a string literal, which the helpers above take. It
// also fails on an entry for a metric that is not defined. Call it after
// constructing every collector of the package, so their names are defined.
func RequireAsserted(t testing.TB, asserted map[string]string, prefixes []string, collectors ...prometheus.Collector) {
	t.Helper()
	bodies := map[string]map[string]map[string]bool{}
	defined := metrics.Defined()
	for _, c := range collectors {
		defined = append(defined, metrics.Names(c)...)
	}
	for _, name := range defined {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		test, ok := asserted[name]
		if !ok {
			t.Errorf("%s is defined but no test asserts it: assert its value in a test and list it", name)
			continue
		}
		dir, fn := ".", test
		if i := strings.LastIndex(test, "/"); i >= 0 {
			dir, fn = test[:i], test[i+1:]
		}
		if bodies[dir] == nil {
			bodies[dir] = testBodies(t, dir)
		}
		if lits, ok := bodies[dir][fn]; !ok {
			t.Errorf("%s: the test %s does not exist in this package", name, test)
		} else if !lits[name] {
			t.Errorf("%s: the test %s never names it in a string literal", name, test)
		}
	}
	for name := range asserted {
		if !slices.Contains(defined, name) {
			t.Errorf("%s is listed as asserted but not defined (renamed or removed?)", name)
		}
	}
}

// testBodies parses the test files in dir and returns, for each test
// function, the string literals in its body.
func testBodies(t testing.TB, dir string) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range parsed.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			lits := map[string]bool{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						lits[s] = true
					}
				}
				return true
			})
			out[fn.Name.Name] = lits
		}
	}
	return out
}
