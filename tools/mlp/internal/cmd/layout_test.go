package cmd

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// groups are the command groups' packages, below this one.
var groups = []string{"train", "notebook", "featurestore", "version"}

const module = "github.com/ml-platform/ml-platform/tools/mlp/"

// TestNoGroupImportsAnother keeps the layout of kubectl's pkg/cmd: a
// command group builds on the shared packages only, never on another group
// or on this root package, so that each group can be read, changed and
// tested alone.
func TestNoGroupImportsAnother(t *testing.T) {
	for _, g := range groups {
		for _, imp := range imports(t, g) {
			rel, ok := strings.CutPrefix(imp, module+"internal/cmd")
			if !ok {
				continue
			}
			if other := strings.TrimPrefix(rel, "/"); rel == "" || slices.Contains(groups, other) {
				t.Errorf("package %s imports %s: a command group may import only the shared packages", g, imp)
			}
		}
	}
}

// imports lists what the Go files of the directory dir import, tests
// included.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var out []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range parsed.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, path)
		}
	}
	return out
}
