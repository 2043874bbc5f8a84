package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

var env *testenv.Env

// update rewrites the golden files: go test ./internal/cli -update.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{
		"../../../../charts/trainingjob-operator/files/crds",
		"../../../../charts/notebook-operator/files/crds",
		"../../../../charts/featurestore-operator/files/crds",
		"testdata/crds",
	}}, &env)
}

// ageOffset puts the test clock so far after every object's creation that
// ages print the same on every run ("400d").
const ageOffset = 400 * 24 * time.Hour

type result struct {
	out, err string
	code     int
}

// cli runs one mlp command line as the user of cfg in namespace ns. tweak
// replaces dependencies (log streams, port-forwarding) for this run.
func cli(ctx context.Context, t *testing.T, cfg *rest.Config, ns string, tweak func(*Options), args ...string) result {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	o := DefaultOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.ConfigFlags = genericclioptions.NewConfigFlags(false)
	o.ConfigFlags.KubeConfig = &kubeconfig
	o.ConfigFlags.Namespace = &ns
	o.Now = func() time.Time { return time.Now().Add(ageOffset) }
	o.PollInterval = 100 * time.Millisecond
	o.Version = "v0.0.0-test"
	o.Logs = noLogs
	o.Forward = nil
	o.Browser = nil
	if tweak != nil {
		tweak(o)
	}
	code := Run(ctx, o, args)
	return result{out: out.String(), err: errOut.String(), code: code}
}

func run(t *testing.T, ns string, args ...string) result {
	t.Helper()
	return cli(context.Background(), t, env.Config, ns, nil, args...)
}

// adminClient talks to the test apiserver as a cluster administrator, in
// the role of the operators and of the platform team.
func adminClient(t *testing.T) client.Client {
	t.Helper()
	s := newScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noLogs stands in for the kubelet, which the test control plane does not
// have: reading a log fails as it does for an unscheduled pod.
func noLogs(context.Context, *session, *corev1.Pod, *corev1.PodLogOptions) (io.ReadCloser, error) {
	return nil, errNoKubelet
}

var errNoKubelet = errors.New("the test control plane has no kubelet")

var (
	uidRE     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	rvRE      = regexp.MustCompile(`("?resourceVersion"?: )"[0-9]+"`)
	tsRE      = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z`)
	genNameRE = regexp.MustCompile(`mlp-test-[a-z0-9]+`)
)

// normalize replaces what differs between runs (uids, resource versions,
// timestamps, the generated namespace) with placeholders.
func normalize(s, ns string) string {
	s = strings.ReplaceAll(s, ns, "NAMESPACE")
	s = uidRE.ReplaceAllString(s, "UID")
	s = rvRE.ReplaceAllString(s, `${1}"RV"`)
	s = tsRE.ReplaceAllString(s, "TIME")
	return genNameRE.ReplaceAllString(s, "NAMESPACE")
}

// golden compares got with testdata/NAME.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
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

func newNamespace(t *testing.T) string {
	t.Helper()
	return testenv.CreateNamespace(t, adminClient(t), "mlp-test")
}
