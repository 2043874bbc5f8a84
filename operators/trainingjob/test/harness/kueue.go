package harness

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// KueueNamespace is Kueue's own namespace, its configuration's default.
const KueueNamespace = "kueue-system"

// kueueMetricsCertDir is fixed in Kueue's cmd/kueue/main.go when its
// internal certificate management is off: the manager exits at start
// unless a certificate is there (in a cluster, a mounted Secret).
const kueueMetricsCertDir = "/etc/kueue/metrics/certs"

// KueueBinary builds (once, cached) and returns the Kueue controller
// manager pinned in tools/kueue.
func KueueBinary(repoRoot string) (string, error) {
	return runScript(filepath.Join(repoRoot, "operators", "trainingjob", "hack", "kueue-bin.sh"), "building Kueue")
}

// KueueModuleDir is the source of the Kueue module pinned in tools/kueue in
// the module cache: its CRDs and webhook manifests are installed from
// there, as shipped, rather than from copies.
func KueueModuleDir(repoRoot string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue")
	cmd.Dir = filepath.Join(repoRoot, "tools", "kueue")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating the Kueue module: %w: %s", err, stderrOf(err))
	}
	dir := string(trimNewline(out))
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
	return string(trimNewline(out)), nil
}

func stderrOf(err error) []byte {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.Stderr
	}
	return nil
}

// KueueOptions configure a started Kueue.
type KueueOptions struct {
	// Binary is the controller manager (KueueBinary); ModuleDir the
	// module's source (KueueModuleDir).
	Binary, ModuleDir string
	// WorkDir receives its kubeconfig, configuration, certificates and log.
	WorkDir string
	// Frameworks are the job integrations to switch on, e.g. "batch/job".
	Frameworks []string
	// Visibility switches on Kueue's visibility server (the
	// pendingworkloads API) and registers it with the API server as
	// Kueue's manifests do. The API server must run with FrontProxyArgs:
	// the aggregator authenticates to Kueue with its front-proxy
	// certificate.
	Visibility bool
}

// Kueue is Kueue's controller manager running as a process outside any
// cluster, with its CRDs and webhooks installed in the API server.
type Kueue struct {
	logPath string
	process *testenv.Process
	logFile *os.File
	hooks   envtest.WebhookInstallOptions
	c       client.Client
	// visibilityPort is the visibility server's port, zero when it is off;
	// registered are the APIServices and Service that expose it.
	visibilityPort int
	registered     []client.Object
}

// StartKueue installs Kueue's CRDs and webhook configurations from its
// module's manifests into the API server behind admin (a cluster
// administrator's config, also Kueue's identity) and runs Kueue until it
// serves its webhooks. The webhooks point at the process on a loopback
// port with a certificate made here, as envtest's WebhookInstallOptions
// does for an operator's own webhooks.
func StartKueue(ctx context.Context, admin *rest.Config, opts KueueOptions) (*Kueue, error) {
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return nil, err
	}
	k := &Kueue{logPath: filepath.Join(opts.WorkDir, "kueue.log"), c: c, hooks: envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}}
	// The CA, the serving certificate and the webhook port.
	if err := k.hooks.PrepWithoutInstalling(); err != nil {
		return nil, err
	}
	if err := k.installCRDs(admin, opts.ModuleDir); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
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

// writeConfig writes Kueue's Configuration (config.kueue.x-k8s.io
// v1beta2): only jobs that name a queue are Kueue's, its certificates are
// the test's, everything it serves is on loopback.
func (k *Kueue) writeConfig(path string, probePort int, frameworks []string) error {
	metricsPort, err := testenv.FreePort()
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"apiVersion":                 "config.kueue.x-k8s.io/v1beta2",
		"kind":                       "Configuration",
		"namespace":                  KueueNamespace,
		"manageJobsWithoutQueueName": false,
		"internalCertManagement":     map[string]any{"enable": false},
		"leaderElection":             map[string]any{"leaderElect": false},
		"health":                     map[string]any{"healthProbeBindAddress": "127.0.0.1:" + strconv.Itoa(probePort)},
		"metrics":                    map[string]any{"bindAddress": "127.0.0.1:" + strconv.Itoa(metricsPort)},
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
	cmd.Env = append(cmd.Env, "MLP_UPPER="+upper, "MLP_WORK="+work, "MLP_CERTS="+kueueMetricsCertDir, "MLP_SERVING="+certDir, "MLP_ROOT="+root)
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
		return fmt.Errorf("Kueue reads its certificates from %s and /visibility; running it in a private mount namespace needs unshare: %w", kueueMetricsCertDir, err)
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

// installCRDs installs the module's CRDs, with the conversion webhook its
// kustomization patches in for the kinds that have one.
func (k *Kueue) installCRDs(admin *rest.Config, moduleDir string) error {
	base := filepath.Join(moduleDir, "config", "components", "crd")
	read := envtest.CRDInstallOptions{Paths: []string{filepath.Join(base, "bases")}, ErrorIfPathMissing: true}
	if err := envtest.ReadCRDFiles(&read); err != nil {
		return err
	}
	crds := read.CRDs
	converted, err := conversionPatchedCRDs(base)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if !converted[crd.Name] {
			continue
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(k.url("/convert")), CABundle: k.hooks.LocalServingCAData},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	}
	_, err = envtest.InstallCRDs(admin, envtest.CRDInstallOptions{CRDs: crds, MaxTime: time.Minute})
	return err
}

// conversionPatchedCRDs are the names of the CRDs that Kueue's
// config/components/crd/kustomization.yaml gives a conversion webhook.
func conversionPatchedCRDs(base string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(base, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var kustomization struct {
		Patches []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	if err := yaml.Unmarshal(b, &kustomization); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range kustomization.Patches {
		if !strings.Contains(filepath.Base(p.Path), "webhook_in_") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(base, p.Path))
		if err != nil {
			return nil, err
		}
		var patch metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(b, &patch); err != nil {
			return nil, err
		}
		out[patch.Name] = true
	}
	return out, nil
}

func (k *Kueue) url(path string) string {
	return "https://" + k.hooks.LocalServingHost + ":" + strconv.Itoa(k.hooks.LocalServingPort) + path
}

// installWebhooks creates the module's webhook configurations, each
// webhook pointed at the process, and waits until the API server calls
// them: Kueue's Job webhook then suspends a queued Job created running.
func (k *Kueue) installWebhooks(ctx context.Context, moduleDir string) error {
	b, err := os.ReadFile(filepath.Join(moduleDir, "config", "components", "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		obj, err := k.webhookConfiguration(raw)
		if err != nil {
			return err
		}
		if obj == nil {
			continue
		}
		if err := k.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return k.waitWebhooks(ctx)
}

// webhookConfiguration decodes one manifest and points its webhooks at the
// process.
func (k *Kueue) webhookConfiguration(raw map[string]any) (client.Object, error) {
	b, err := yaml.Marshal(raw)
	if err != nil {
		return nil, err
	}
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		if cc.Service != nil && cc.Service.Path != nil {
			cc.URL = ptr.To(k.url(*cc.Service.Path))
			cc.Service = nil
		}
		cc.CABundle = k.hooks.LocalServingCAData
	}
	switch raw["kind"] {
	case "MutatingWebhookConfiguration":
		obj := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := yaml.Unmarshal(b, obj); err != nil {
			return nil, err
		}
		for i := range obj.Webhooks {
			point(&obj.Webhooks[i].ClientConfig)
		}
		k.hooks.MutatingWebhooks = append(k.hooks.MutatingWebhooks, obj)
		return obj, nil
	case "ValidatingWebhookConfiguration":
		obj := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := yaml.Unmarshal(b, obj); err != nil {
			return nil, err
		}
		for i := range obj.Webhooks {
			point(&obj.Webhooks[i].ClientConfig)
		}
		k.hooks.ValidatingWebhooks = append(k.hooks.ValidatingWebhooks, obj)
		return obj, nil
	}
	return nil, nil
}

// waitWebhooks waits until a dry-run Job that names a queue and is not
// suspended comes back suspended from Kueue's Job webhook; the API server
// learns of new webhook configurations a little after they are created.
func (k *Kueue) waitWebhooks(ctx context.Context) error {
	// A refused call (webhook not reachable yet) is retried; the last one
	// explains a timeout.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "webhook-probe-", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "probe"}},
			Spec: batchv1.JobSpec{
				Suspend: ptr.To(false),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "probe", Image: "probe"}},
				}},
			},
		}
		last = k.c.Create(ctx, job, client.DryRunAll)
		return last == nil && ptr.Deref(job.Spec.Suspend, false), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Kueue's webhooks: %w (last call: %w)", err, last)
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

// visibilityService is the Service that Kueue's APIServices name.
const visibilityService = "visibility-server"

// registerVisibility creates the module's APIServices of the visibility
// API and the Service they name, and waits until the aggregator finds the
// API available. The Service is an ExternalName of localhost: without
// --enable-aggregator-routing the aggregator dials an ExternalName
// Service's host on the APIService's port, which is the process's port
// here, while Endpoints may not hold a loopback address. Kueue's manifests
// skip TLS verification (insecureSkipTLSVerify), so the webhook
// certificate serves.
func (k *Kueue) registerVisibility(ctx context.Context, moduleDir string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: KueueNamespace, Name: visibilityService},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if err := k.c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	k.registered = append(k.registered, svc)
	var services []*unstructured.Unstructured
	for _, version := range []string{"v1beta1", "v1beta2"} {
		b, err := os.ReadFile(filepath.Join(moduleDir, "config", "components", "visibility", "apiservice_"+version+".yaml"))
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(obj.Object, int64(k.visibilityPort), "spec", "service", "port"); err != nil {
			return err
		}
		if err := k.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		k.registered = append(k.registered, obj)
		services = append(services, obj)
	}
	for _, obj := range services {
		if err := k.waitAvailable(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// waitAvailable waits until the aggregator reports the APIService
// Available, which it does once its discovery call reached Kueue.
func (k *Kueue) waitAvailable(ctx context.Context, obj *unstructured.Unstructured) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for APIService %s to be Available: %w (last: %s)", obj.GetName(), err, last)
	}
	return nil
}

// FrontProxyArgs makes, in dir, a front-proxy CA and the client
// certificate it signs, and returns the kube-apiserver flags that make its
// aggregator present that certificate to aggregated API servers (Kueue's
// visibility server) and publish the CA for them to trust the user it
// forwards in X-Remote-* headers.
func FrontProxyArgs(dir string) (map[string][]string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front-proxy-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "front-proxy-client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"front-proxy-ca.crt":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"front-proxy-client.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"front-proxy-client.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return map[string][]string{
		"requestheader-client-ca-file":       {filepath.Join(dir, "front-proxy-ca.crt")},
		"requestheader-allowed-names":        {"front-proxy-client"},
		"requestheader-username-headers":     {"X-Remote-User"},
		"requestheader-group-headers":        {"X-Remote-Group"},
		"requestheader-extra-headers-prefix": {"X-Remote-Extra-"},
		"proxy-client-cert-file":             {filepath.Join(dir, "front-proxy-client.crt")},
		"proxy-client-key-file":              {filepath.Join(dir, "front-proxy-client.key")},
	}, nil
}
