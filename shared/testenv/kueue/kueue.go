package kueue

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// Namespace is Kueue's own namespace, its configuration's default.
const Namespace = "kueue-system"

// metricsCertDir is fixed in Kueue's cmd/kueue/main.go when its internal
// certificate management is off: the manager exits at start unless a
// certificate is there (in a cluster, a mounted Secret).
const metricsCertDir = "/etc/kueue/metrics/certs"

// Binary builds (once, cached) and returns the Kueue controller manager
// pinned in tools/kueue, through the script `make kueue-bin` runs.
func Binary(repoRoot string) (string, error) {
	return runScript(filepath.Join(repoRoot, "operators", "trainingjob", "hack", "kueue-bin.sh"), "building Kueue")
}

// ModuleDir is the source of the Kueue module pinned in tools/kueue in the
// module cache: its CRDs and webhook manifests are installed from there,
// as shipped, rather than from copies.
func ModuleDir(repoRoot string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue")
	cmd.Dir = filepath.Join(repoRoot, "tools", "kueue")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating the Kueue module: %w: %s", err, stderrOf(err))
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("locating the Kueue module: it is not in the module cache")
	}
	return dir, nil
}

func runScript(path, what string) (string, error) {
	out, err := exec.Command(path).Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", what, err, stderrOf(err))
	}
	return strings.TrimSpace(string(out)), nil
}

func stderrOf(err error) []byte {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.Stderr
	}
	return nil
}

// Options configure a started Kueue.
type Options struct {
	// Binary is the controller manager (Binary); ModuleDir the module's
	// source (ModuleDir).
	Binary, ModuleDir string
	// WorkDir receives its kubeconfig, configuration, certificates and log.
	WorkDir string
	// Frameworks are the job integrations to switch on, e.g. "batch/job",
	// or "statefulset", which also switches on "pod" in Kueue v0.17.
	Frameworks []string
	// Visibility switches on Kueue's visibility server (the
	// pendingworkloads API) and registers it with the API server as
	// Kueue's manifests do. The API server must run with
	// testenv.Options.FrontProxy:
	// the aggregator authenticates to Kueue with its front-proxy
	// certificate.
	Visibility bool
}

// Kueue is Kueue's controller manager running as a process outside any
// cluster, with its CRDs and webhooks installed in the API server.
type Kueue struct {
	logPath    string
	frameworks []string
	process    *testenv.Process
	logFile    *os.File
	hooks      envtest.WebhookInstallOptions
	c          client.Client
	// visibilityPort is the visibility server's port, zero when it is off;
	// registered are the APIServices and Service that expose it.
	visibilityPort int
	registered     []client.Object
}

// Start installs Kueue's CRDs and webhook configurations from its module's
// manifests into the API server behind admin (a cluster administrator's
// config, also Kueue's identity) and runs Kueue until it serves its
// webhooks. The webhooks point at the process on a loopback port with a
// certificate made here, as envtest's WebhookInstallOptions does for an
// operator's own webhooks.
func Start(ctx context.Context, admin *rest.Config, opts Options) (*Kueue, error) {
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return nil, err
	}
	k := &Kueue{
		logPath: filepath.Join(opts.WorkDir, "kueue.log"), frameworks: opts.Frameworks, c: c,
		hooks: envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"},
	}
	// The CA, the serving certificate and the webhook port.
	if err := k.hooks.PrepWithoutInstalling(); err != nil {
		return nil, err
	}
	if err := k.installCRDs(admin, opts.ModuleDir); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	kubeconfig := filepath.Join(opts.WorkDir, "kueue.kubeconfig")
	if err := testenv.WriteKubeconfig(admin, kubeconfig); err != nil {
		return nil, err
	}
	configPath := filepath.Join(opts.WorkDir, "kueue-config.yaml")
	probePort, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	if opts.Visibility {
		if k.visibilityPort, err = testenv.FreePort(); err != nil {
			return nil, err
		}
	}
	if err := k.writeConfig(configPath, probePort, opts.Frameworks); err != nil {
		return nil, err
	}
	if err := k.start(opts.Binary, kubeconfig, configPath, probePort); err != nil {
		return nil, err
	}
	if err := k.installWebhooks(ctx, opts.ModuleDir); err != nil {
		return nil, errors.Join(err, k.Stop())
	}
	if opts.Visibility {
		if err := k.registerVisibility(ctx, opts.ModuleDir); err != nil {
			return nil, errors.Join(err, k.Stop())
		}
	}
	return k, nil
}

// ManagedNamespaces is the managedJobsNamespaceSelector the configuration
// states (Kueue's own default, written out): the pod-based integrations
// (pod, statefulset) leave kube-system and Kueue's namespace alone, as the
// namespaceSelector of their webhooks in Kueue's manifests does.
var ManagedNamespaces = map[string]any{"matchExpressions": []any{map[string]any{
	"key": corev1.LabelMetadataName, "operator": "NotIn", "values": []any{metav1.NamespaceSystem, Namespace},
}}}

// writeConfig writes Kueue's Configuration (config.kueue.x-k8s.io
// v1beta2): only jobs that name a queue are Kueue's, its certificates are
// the test's, everything it serves is on loopback.
func (k *Kueue) writeConfig(path string, probePort int, frameworks []string) error {
	metricsPort, err := testenv.FreePort()
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"apiVersion":                   "config.kueue.x-k8s.io/v1beta2",
		"kind":                         "Configuration",
		"namespace":                    Namespace,
		"manageJobsWithoutQueueName":   false,
		"managedJobsNamespaceSelector": ManagedNamespaces,
		"internalCertManagement":       map[string]any{"enable": false},
		"leaderElection":               map[string]any{"leaderElect": false},
		"health":                       map[string]any{"healthProbeBindAddress": "127.0.0.1:" + strconv.Itoa(probePort)},
		"metrics":                      map[string]any{"bindAddress": "127.0.0.1:" + strconv.Itoa(metricsPort)},
		"webhook": map[string]any{
			"host": k.hooks.LocalServingHost, "port": k.hooks.LocalServingPort, "certDir": k.hooks.LocalServingCertDir,
		},
		"integrations": map[string]any{"frameworks": frameworks},
	}
	if k.visibilityPort != 0 {
		cfg["visibilityServer"] = map[string]any{"bindAddress": "127.0.0.1", "bindPort": k.visibilityPort}
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// privateCerts wraps Kueue's command so that it runs in a mount namespace
// of its own, where the serving certificate of certDir is found in the
// fixed folders Kueue reads its metrics certificate (under /etc) and its
// visibility server's certificate (/visibility) from. /etc is an overlay
// whose writes land in workDir; the root is a tmpfs that binds every
// entry of the real root and adds /visibility. Nothing outside the test's
// temp dir is written, and parallel Kueues never share the files. A caller
// who is not root gets a user namespace to mount in.
func privateCerts(cmd *exec.Cmd, certDir, workDir string) error {
	upper, work, root := filepath.Join(workDir, "etc-upper"), filepath.Join(workDir, "etc-work"), filepath.Join(workDir, "root")
	for _, dir := range []string{upper, work, root} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	const script = `set -e
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$MLP_UPPER,workdir=$MLP_WORK" /etc
mkdir -p "$MLP_CERTS" && cp "$MLP_SERVING/tls.crt" "$MLP_SERVING/tls.key" "$MLP_CERTS/"
mount -t tmpfs tmpfs "$MLP_ROOT"
for entry in /*; do
	name=${entry#/}
	if [ -L "$entry" ]; then ln -s "$(readlink "$entry")" "$MLP_ROOT/$name"
	elif [ -d "$entry" ]; then mkdir "$MLP_ROOT/$name" && mount --rbind "$entry" "$MLP_ROOT/$name"
	fi
done
mkdir "$MLP_ROOT/visibility" && cp "$MLP_SERVING/tls.crt" "$MLP_SERVING/tls.key" "$MLP_ROOT/visibility/"
exec chroot "$MLP_ROOT" /bin/sh -c 'cd "$0" && exec "$@"' "$PWD" "$@"`
	cmd.Env = append(cmd.Env, "MLP_UPPER="+upper, "MLP_WORK="+work, "MLP_CERTS="+metricsCertDir, "MLP_SERVING="+certDir, "MLP_ROOT="+root)
	unshare := []string{"unshare", "--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		// A user namespace in which the caller is root may mount too
		// (overlay since Linux 5.11) and chroot; Kueue keeps the caller's
		// network.
		unshare = append(unshare, "--user", "--map-root-user")
	}
	cmd.Args = append(append(unshare, "--", "/bin/sh", "-c", script, "kueue"), cmd.Args...)
	path, err := exec.LookPath("unshare")
	if err != nil {
		return fmt.Errorf("Kueue reads its certificates from %s and /visibility; running it in a private mount namespace needs unshare: %w", metricsCertDir, err)
	}
	cmd.Path = path
	return nil
}

func (k *Kueue) start(binary, kubeconfig, configPath string, probePort int) error {
	logFile, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	k.process, err = testenv.StartProcess(testenv.ProcessOptions{
		Name: "Kueue",
		Port: k.hooks.LocalServingPort,
		Command: func(int) (*exec.Cmd, error) {
			// The visibility server (the pending-workloads API) is reached
			// through an aggregated APIService; it is off unless asked
			// for. It authenticates requests through the API server given
			// by --kubeconfig (the environment variable alone leaves it
			// looking for an in-cluster configuration).
			gate := "--feature-gates=VisibilityOnDemand=" + strconv.FormatBool(k.visibilityPort != 0)
			cmd := exec.Command(binary, "--config="+configPath, "--kubeconfig="+kubeconfig, gate, "--zap-log-level=2")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
			// Nothing it writes lands in the caller's directory.
			cmd.Dir = filepath.Dir(configPath)
			return cmd, privateCerts(cmd, k.hooks.LocalServingCertDir, cmd.Dir)
		},
		Ready: func(ctx context.Context) error { return probeReady(ctx, probePort) },
		Log:   logFile,
	})
	if err != nil {
		_ = logFile.Close()
		return err
	}
	k.logFile = logFile
	return nil
}

// probeReady succeeds once Kueue's readiness probe does: its webhook
// server listens with its certificate.
func probeReady(ctx context.Context, port int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// Stop ends the process and removes its webhook configurations, which
// would otherwise fail every call they match.
func (k *Kueue) Stop() error {
	var errs []error
	for _, obj := range k.hooks.MutatingWebhooks {
		errs = append(errs, client.IgnoreNotFound(k.c.Delete(context.Background(), obj)))
	}
	for _, obj := range k.hooks.ValidatingWebhooks {
		errs = append(errs, client.IgnoreNotFound(k.c.Delete(context.Background(), obj)))
	}
	for _, obj := range k.registered {
		errs = append(errs, client.IgnoreNotFound(k.c.Delete(context.Background(), obj)))
	}
	if k.process != nil {
		errs = append(errs, k.process.Stop())
		_ = k.logFile.Close()
		k.process = nil
	}
	errs = append(errs, k.hooks.Cleanup())
	return errors.Join(errs...)
}

// LogPath is the process's log file.
func (k *Kueue) LogPath() string { return k.logPath }

// Log is what the process wrote.
func (k *Kueue) Log() string {
	if k.process == nil {
		b, _ := os.ReadFile(k.logPath)
		return string(b)
	}
	return k.process.Log()
}
