// Package clitest is the one harness of the mlp CLI's tests: a real
// apiserver with our CRDs (once per test package, through TestMain), the
// command line run as a given user, the objects the tests start from, and
// golden files.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// Env is the test package's control plane, started by Main.
var Env *testenv.Env

// update rewrites the golden files: go test ./internal/cmd/... -update.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// root builds the command tree under test, given to Main.
var root func(*util.Options) *cobra.Command

// Main starts the control plane with our CRDs (and the same-named CRDs of
// Kubeflow and Feast, which must never be addressed), runs the package's
// tests against the command tree newRoot builds, and stops it. A command
// group's package passes Groups(NewCommand): it cannot import the whole
// tree, which imports it.
func Main(m *testing.M, newRoot func(*util.Options) *cobra.Command) {
	root = newRoot
	repo := testenv.RepoRoot()
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{
		filepath.Join(repo, "charts/trainingjob-operator/files/crds"),
		filepath.Join(repo, "charts/notebook-operator/files/crds"),
		filepath.Join(repo, "charts/featurestore-operator/files/crds"),
		filepath.Join(repo, "tools/mlp/test/clitest/testdata/crds"),
	}}, &Env)
}

// Groups is the mlp root command with only the given command groups.
func Groups(groups ...func(*util.Options) *cobra.Command) func(*util.Options) *cobra.Command {
	return func(o *util.Options) *cobra.Command {
		r := util.NewRoot(o)
		for _, g := range groups {
			r.AddCommand(g(o))
		}
		return r
	}
}

// AgeOffset puts the test clock so far after every object's creation that
// ages print the same on every run ("400d").
const AgeOffset = 400 * 24 * time.Hour

// Result is what one command line printed and its exit code.
type Result struct {
	Out, Err string
	Code     int
}

// CLI runs one mlp command line as the user of cfg in namespace ns. tweak
// replaces dependencies (log streams, port-forwarding) for this run.
func CLI(ctx context.Context, t *testing.T, cfg *rest.Config, ns string, tweak func(*util.Options), args ...string) Result {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	o := util.DefaultOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.ConfigFlags = genericclioptions.NewConfigFlags(false)
	o.ConfigFlags.KubeConfig = &kubeconfig
	o.ConfigFlags.Namespace = &ns
	o.Now = func() time.Time { return time.Now().Add(AgeOffset) }
	o.PollInterval = 100 * time.Millisecond
	o.Version = "v0.0.0-test"
	o.Logs = NoLogs
	o.Forward = nil
	o.Browser = nil
	if tweak != nil {
		tweak(o)
	}
	code := util.Execute(ctx, o, root(o), args)
	return Result{Out: out.String(), Err: errOut.String(), Code: code}
}

// Run runs one command line as the administrator.
func Run(t *testing.T, ns string, args ...string) Result {
	t.Helper()
	return CLI(context.Background(), t, Env.Config, ns, nil, args...)
}

// AdminClient talks to the test apiserver as a cluster administrator, in
// the role of the operators and of the platform team.
func AdminClient(t *testing.T) client.Client {
	t.Helper()
	s := kube.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return Env.AdminClient(t, s)
}

// NoLogs stands in for the kubelet, which the test control plane does not
// have: reading a log fails as it does for an unscheduled pod.
func NoLogs(context.Context, *kube.Session, *corev1.Pod, *corev1.PodLogOptions) (io.ReadCloser, error) {
	return nil, ErrNoKubelet
}

// ErrNoKubelet is the error of NoLogs.
var ErrNoKubelet = errors.New("the test control plane has no kubelet")

var (
	uidRE     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	rvRE      = regexp.MustCompile(`("?resourceVersion"?: )"[0-9]+"`)
	tsRE      = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z`)
	genNameRE = regexp.MustCompile(`mlp-test-[a-z0-9]+`)
)

// Normalize replaces what differs between runs (uids, resource versions,
// timestamps, the generated namespace) with placeholders.
func Normalize(s, ns string) string {
	s = strings.ReplaceAll(s, ns, "NAMESPACE")
	s = uidRE.ReplaceAllString(s, "UID")
	s = rvRE.ReplaceAllString(s, `${1}"RV"`)
	s = tsRE.ReplaceAllString(s, "TIME")
	return genNameRE.ReplaceAllString(s, "NAMESPACE")
}

// Golden compares got with testdata/NAME.golden, or rewrites it with -update.
func Golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", path, err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// NewNamespace creates a namespace for one test.
func NewNamespace(t *testing.T) string {
	t.Helper()
	return testenv.CreateNamespace(t, AdminClient(t), "mlp-test")
}

// Rule grants verbs on one resource of one API group.
func Rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

// UserWithRules is a user granted exactly rules in ns.
func UserWithRules(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	c := AdminClient(t)
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	if err := c.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := c.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	cfg, err := Env.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// CreateAll creates the objects as the administrator.
func CreateAll(t *testing.T, objs ...client.Object) {
	t.Helper()
	c := AdminClient(t)
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// TrainingJob is a PyTorch TrainingJob with workers pods.
func TrainingJob(ns, name string, workers int32) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch, Image: "example.test/train:1", Workers: workers,
			Command: []string{"python", "train.py"},
		},
	}
}

// Notebook is a Notebook with the platform's defaults.
func Notebook(ns, name string) *notebooksv1alpha1.Notebook {
	nb := &notebooksv1alpha1.Notebook{}
	nb.Namespace, nb.Name = ns, name
	return nb
}

// SetJobStatus acts out the operator: it changes the TrainingJob's status
// through the status subresource.
func SetJobStatus(t *testing.T, c client.Client, ns, name string, mutate func(*trainingv1alpha1.TrainingJobStatus)) {
	t.Helper()
	testenv.Eventually(t, "status of "+name+" written", func(ctx context.Context) (bool, error) {
		var tj trainingv1alpha1.TrainingJob
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		mutate(&tj.Status)
		if err := c.Status().Update(ctx, &tj); err != nil {
			if apierrors.IsConflict(err) {
				return false, nil
			}
			return false, client.IgnoreNotFound(err)
		}
		return true, nil
	})
}

// ReadFileMode is a file's content and permission bits.
func ReadFileMode(t *testing.T, path string) (string, os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), st.Mode().Perm()
}

// Hostile is text that a training image, a webhook or another tenant's
// tool can put into an object's status or events: an OSC 52 write to the
// clipboard (ended by BEL), a carriage return after which the next text
// overwrites the line, an 8-bit CSI that clears the screen, a DEL and a
// newline.
const Hostile = "\x1b]52;c;aGk=\x07ok\r\u009b2J\x7f\nnext"

// HostileLine is Hostile as mlp prints it on one line (a table cell, a
// field, the progress line): every control character as a Go escape.
const HostileLine = `\x1b]52;c;aGk=\aok\r\u009b2J\x7f\nnext`

// HostileText is Hostile as mlp prints it in text of several lines (a
// termination message, an error): the same, but the newline kept.
const HostileText = `\x1b]52;c;aGk=\aok\r\u009b2J\x7f` + "\nnext"

// TerminalControls lists, quoted, what a terminal would act upon in s
// besides newlines and tabs: control characters and bytes that are not
// UTF-8.
func TerminalControls(s string) []string {
	var found []string
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			found = append(found, fmt.Sprintf("byte %#x", s[i]))
		case unicode.IsControl(r) && r != '\n' && r != '\t':
			found = append(found, strconv.QuoteRune(r))
		}
	}
	return found
}

// Watches counts the watch streams a command opens and has not closed yet,
// seen on the wire: a watch that outlives the command that needed it
// keeps a connection and a goroutine of the API server's busy.
type Watches struct {
	opened, open atomic.Int64
}

// Count is a tweak for CLI that makes the command's session count its
// watches.
func (w *Watches) Count(o *util.Options) {
	o.ConfigFlags.WrapConfigFn = func(c *rest.Config) *rest.Config {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &watchCounter{next: rt, w: w} })
		return c
	}
}

// Opened is how many watch streams the command opened.
func (w *Watches) Opened() int64 { return w.opened.Load() }

// Open is how many of them it has not closed.
func (w *Watches) Open() int64 { return w.open.Load() }

type watchCounter struct {
	next http.RoundTripper
	w    *Watches
}

func (c *watchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || req.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	c.w.opened.Add(1)
	c.w.open.Add(1)
	resp.Body = &countedBody{ReadCloser: resp.Body, w: c.w}
	return resp, nil
}

// countedBody is a watch stream, counted as closed at its first Close.
type countedBody struct {
	io.ReadCloser
	w      *Watches
	closed sync.Once
}

func (b *countedBody) Close() error {
	b.closed.Do(func() { b.w.open.Add(-1) })
	return b.ReadCloser.Close()
}

// SyncBuffer is an output a test reads while the CLI writes it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cellGap separates the header's column names: the table printer pads
// with at least three spaces, and no name holds three in a row.
var cellGap = regexp.MustCompile(` {3,}`)

// NormalizeTable replaces the cells of the named columns of a printed
// table with the column's name in angle brackets ("<AGE>"), aligns the
// table again and cuts the spaces at the ends of lines. The API server
// computes ages from its own clock, so they differ between runs.
func NormalizeTable(s string, columns ...string) string {
	names, rows := splitTable(s)
	if names == nil {
		return s
	}
	var b strings.Builder
	w := printers.GetNewTabWriter(&b)
	fmt.Fprintln(w, strings.Join(names, "\t"))
	for _, cells := range rows {
		for c := range cells {
			if slices.Contains(columns, names[c]) {
				cells[c] = "<" + names[c] + ">"
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	_ = w.Flush()
	return regexp.MustCompile(`(?m) +$`).ReplaceAllString(b.String(), "")
}

// TableRows are the rows of a printed table, each a map from column name
// to cell; an empty cell is "".
func TableRows(s string) []map[string]string {
	names, rows := splitTable(s)
	var out []map[string]string
	for _, cells := range rows {
		m := map[string]string{}
		for c, name := range names {
			m[name] = cells[c]
		}
		out = append(out, m)
	}
	return out
}

// splitTable cuts a printed table into its column names and cells. A
// column starts where its name starts in the header: the cells are
// left-aligned, and an empty one is blank.
func splitTable(s string) (names []string, rows [][]string) {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if lines[0] == "" {
		return nil, nil
	}
	names = cellGap.Split(lines[0], -1)
	starts := make([]int, len(names))
	for i, loc := range cellGap.FindAllStringIndex(lines[0], -1) {
		starts[i+1] = loc[1]
	}
	for _, l := range lines[1:] {
		cells := make([]string, len(names))
		for c, start := range starts {
			end := len(l)
			if c+1 < len(starts) {
				end = min(starts[c+1], len(l))
			}
			if start < end {
				cells[c] = strings.TrimSpace(l[start:end])
			}
		}
		rows = append(rows, cells)
	}
	return names, rows
}
