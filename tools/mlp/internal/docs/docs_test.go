package docs

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
)

// update rewrites docs/architecture.md's picture: go test ./internal/docs -update (make docs).
var update = flag.Bool("update", false, "rewrite the generated part of docs/architecture.md")

const repoRoot = "../../../.."

// docFiles are the files whose commands people copy.
func docFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"README.md", "docs/*.md", "tools/mlp/README.md", "charts/*/README.md", "charts/*/templates/NOTES.txt", "deploy/*/README.md", "hack/quickstart/quickstart.sh"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// mlpCommand finds an mlp command: mlp (or kubectl mlp) and a subcommand,
// up to the end of the line, a comment, a pipe, a list separator, a line
// continuation or the end of inline code. The first group is what precedes
// it: a backquote for inline code in prose.
var mlpCommand = regexp.MustCompile("(^|[\\s`])(?:kubectl )?mlp((?: -n \\S+)? (?:train|notebook|featurestore|version|completion)\\b[^\\n`#|;&)\\\\]*)")

// optional is a synopsis' optional part, e.g. [--timeout D].
var optional = regexp.MustCompile(`\[[^\]]*\]`)

// TestDocumentedMlpCommandsParse: every mlp command line in the docs names
// a command that exists and runs, with flags it has and as many arguments
// as it takes, so a copied line never fails on its syntax. A command named
// in prose (inline code) may leave out its arguments and flag values.
func TestDocumentedMlpCommandsParse(t *testing.T) {
	found := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mlpCommand.FindAllStringSubmatch(string(b), -1) {
			found++
			line := strings.TrimSpace(optional.ReplaceAllString(m[2], ""))
			if err := parses(line, m[1] == "`"); err != "" {
				t.Errorf("%s: mlp %s: %s", strings.TrimPrefix(f, repoRoot+"/"), line, err)
			}
		}
	}
	if found < 10 {
		t.Errorf("found only %d mlp command lines in the docs; the pattern no longer matches them", found)
	}
}

// parses checks one command line against a fresh command tree and returns
// what is wrong with it, or "". A mention names a command and its flags
// only.
func parses(line string, mention bool) string {
	if i := strings.Index(line, " -- "); i >= 0 {
		line = line[:i] // The training's own command follows.
	}
	var args []string
	for _, f := range strings.Fields(line) {
		// Shell variables and placeholders stand for one argument.
		args = append(args, strings.Trim(f, `"'`))
	}
	var out bytes.Buffer
	root := cmd.NewRootCommand(util.DefaultOptions(genericiooptions.IOStreams{In: &out, Out: &out, ErrOut: &out}))
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err.Error()
	}
	if !cmd.Runnable() {
		return "\"" + cmd.CommandPath() + "\" is a group, not a command"
	}
	if mention {
		for _, a := range rest {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if strings.HasPrefix(a, "--") && cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				return "unknown flag --" + name
			}
		}
		return ""
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err.Error()
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err.Error()
	}
	return ""
}

// TestTroubleshootingCoversEverySharedReason: docs/troubleshooting.md has a
// section for every condition reason of apis/common (but the routine
// Reconciled and Progressing), so a new reason cannot ship undocumented,
// and a section for each symptom users ask about.
func TestTroubleshootingCoversEverySharedReason(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	guide := string(b)
	reasons := sharedReasons(t)
	if len(reasons) < 10 {
		t.Fatalf("found only %v in apis/common; the parse no longer finds the reasons", reasons)
	}
	for _, r := range reasons {
		if r == "Reconciled" || r == "Progressing" {
			continue
		}
		if !strings.Contains(guide, "\n### `"+r+"`\n") {
			t.Errorf("docs/troubleshooting.md has no section \"### `%s`\"", r)
		}
	}
	for _, symptom := range []string{"## A TrainingJob stays Queued", "(`PodsPending`)", "## A FeatureStore will not delete", "## A notebook was culled"} {
		if !strings.Contains(guide, symptom) {
			t.Errorf("docs/troubleshooting.md has no section for %q", symptom)
		}
	}
}

// sharedReasons are the values of the Reason* constants of apis/common.
func sharedReasons(t *testing.T) []string {
	t.Helper()
	path := filepath.Join(repoRoot, "apis", "common", "v1alpha1", "conditions.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Reason") || i >= len(spec.Values) {
				continue
			}
			if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
		}
		return true
	})
	return out
}

// architectureMarkers enclose the generated picture in docs/architecture.md.
const (
	beginGenerated = "<!-- BEGIN GENERATED: make docs -->\n"
	endGenerated   = "<!-- END GENERATED -->\n"
)

// TestArchitectureIsCurrent: the picture in docs/architecture.md is the one
// the charts and CRDs describe; a new chart, CRD or child kind fails this
// test until `make docs` redraws it.
func TestArchitectureIsCurrent(t *testing.T) {
	path := filepath.Join(repoRoot, "docs", "architecture.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, beginGenerated), strings.Index(doc, endGenerated)
	if start < 0 || end < start {
		t.Fatalf("%s lacks the markers %q and %q", path, beginGenerated, endGenerated)
	}
	want, err := architecture(filepath.Join(repoRoot, "charts"))
	if err != nil {
		t.Fatal(err)
	}
	got := doc[start+len(beginGenerated) : end]
	if *update {
		doc = doc[:start+len(beginGenerated)] + want + doc[end:]
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/architecture.md is not the charts' picture (run make docs) (-want +got):\n%s", diff)
	}
}
