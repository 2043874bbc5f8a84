package testenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubernetesVersion is the version of the control-plane binaries that
// `make k8s-bin` builds from tools/k8s; `make verify` checks they agree.
const KubernetesVersion = "v1.34.2"

// controlPlaneStartTimeout bounds the start of etcd and kube-apiserver.
const controlPlaneStartTimeout = 2 * time.Minute

// Options configure a test control plane.
type Options struct {
	// CRDDirectoryPaths are folders or files of CustomResourceDefinitions to
	// install before tests run.
	CRDDirectoryPaths []string

	// ControllerManager also runs kube-controller-manager with only the
	// garbage collector, namespace and PVC protection controllers, so owner
	// reference cascades, namespace deletion and PVC protection are real.
	ControllerManager bool

	// Controllers are further kube-controller-manager controllers to run
	// with ControllerManager, such as job-controller for tests in which
	// the real Job controller creates pods.
	Controllers []string

	// APIServerArgs are extra kube-apiserver flags, name to values.
	APIServerArgs map[string][]string

	// AuditWrites makes kube-apiserver log every write request with its
	// user, for Env.AuditedWrites: tests count what each controller,
	// including processes outside the test, wrote.
	AuditWrites bool

	// FrontProxy gives kube-apiserver front-proxy certificates (made in
	// the environment's own folder), so that its aggregator can forward
	// callers to an aggregated API server such as Kueue's visibility API.
	FrontProxy bool

	// KeepLogger leaves controller-runtime's logger as the TestMain set it
	// (a benchmark discards the logs); by default Main captures them, see
	// CaptureLogs.
	KeepLogger bool
}

// Env is a running control plane.
type Env struct {
	// Config authenticates as a cluster administrator (system:masters).
	Config *rest.Config

	env     *envtest.Environment
	workDir string
	kcm     *exec.Cmd
	kcmDone chan struct{}
	// stopRecording ends the watch that records Secrets for VerifyLogs.
	stopRecording context.CancelFunc
	// controllers are the Options.Controllers kube-controller-manager runs.
	controllers []string
	// auditLog is the API server's audit log with Options.AuditWrites.
	auditLog string
	// apiServerDown is true between StopAPIServer and StartAPIServer.
	apiServerDown bool
}

// BinaryDir is where the control-plane binaries are: KUBEBUILDER_ASSETS when
// set, else the cache folder `make k8s-bin` fills.
func BinaryDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "ml-platform", "k8s", KubernetesVersion)
}

// Start runs etcd and kube-apiserver (and kube-controller-manager when
// asked) and installs the CRDs. It takes about five seconds.
func Start(opts Options) (*Env, error) {
	bin := BinaryDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s missing in %s (run `make k8s-bin`, or set KUBEBUILDER_ASSETS): %w", name, bin, err)
		}
	}
	workDir, err := os.MkdirTemp("", "mlp-testenv-")
	if err != nil {
		return nil, err
	}
	if err := reapAfterExit(workDir); err != nil {
		_ = os.RemoveAll(workDir)
		return nil, fmt.Errorf("starting the watchdog of %s: %w", workDir, err)
	}
	// A fixed certificate folder lets RestartAPIServer bring the apiserver
	// back with the same CA, so clients keep working across the restart.
	certDir := filepath.Join(workDir, "apiserver")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return nil, err
	}
	apiServer := &envtest.APIServer{CertDir: certDir, StopTimeout: 5 * time.Second}
	// Tests restart the apiserver under running controllers; a short
	// shutdown delay keeps those restarts quick.
	apiServer.Configure().Set("shutdown-delay-duration", "0s")
	apiServerArgs, auditLog := opts.APIServerArgs, ""
	if opts.AuditWrites {
		if auditLog, apiServerArgs, err = auditArgs(workDir, apiServerArgs); err != nil {
			return nil, err
		}
	}
	if opts.FrontProxy {
		proxyArgs, err := frontProxyArgs(workDir)
		if err != nil {
			return nil, err
		}
		apiServerArgs = maps.Clone(apiServerArgs)
		if apiServerArgs == nil {
			apiServerArgs = map[string][]string{}
		}
		maps.Copy(apiServerArgs, proxyArgs)
	}
	for name, values := range apiServerArgs {
		apiServer.Configure().Set(name, values...)
	}
	e := &Env{
		workDir:     workDir,
		controllers: opts.Controllers,
		auditLog:    auditLog,
		env: &envtest.Environment{
			BinaryAssetsDirectory: bin,
			CRDDirectoryPaths:     opts.CRDDirectoryPaths,
			ErrorIfCRDPathMissing: true,
			// etcd's data in workDir too: the watchdog finds every server
			// by that folder in its command line.
			ControlPlane: envtest.ControlPlane{APIServer: apiServer, Etcd: &envtest.Etcd{DataDir: filepath.Join(workDir, "etcd")}},
			// envtest gives each process 20 s to come up, which a loaded
			// two-core machine exceeds (kube-apiserver took longer with
			// both cores busy): a slow start is not a failure.
			ControlPlaneStartTimeout: controlPlaneStartTimeout,
		},
	}
	cfg, err := e.env.Start()
	if err != nil {
		_ = os.RemoveAll(workDir)
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", bin, err)
	}
	e.Config = cfg
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	var recordCtx context.Context
	recordCtx, e.stopRecording = context.WithCancel(context.Background())
	recordSecrets(recordCtx, cs)
	if opts.ControllerManager {
		if err := e.startControllerManager(bin); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// AddUser returns a config that authenticates as the named user with the
// given groups. RBAC decides what the user may do.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port
// with the same certificates, keeping etcd and so every object.
func (e *Env) RestartAPIServer() error {
	if err := e.StopAPIServer(); err != nil {
		return err
	}
	return e.StartAPIServer()
}

// StopAPIServer stops kube-apiserver (etcd keeps running) until
// StartAPIServer, for tests of an outage that lasts.
func (e *Env) StopAPIServer() error {
	apiServer := e.env.ControlPlane.APIServer
	// Stop kills the apiserver when it has not drained its watches within
	// StopTimeout; an abrupt stop is a restart too, so only a port that
	// stays bound is an error.
	_ = apiServer.Stop()
	e.apiServerDown = true
	return waitClosed(net.JoinHostPort(apiServer.SecureServing.Address, apiServer.SecureServing.Port), 30*time.Second)
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the same
// port with the same certificates, and returns once it serves. It restarts
// kube-controller-manager too: its informers back off through the outage
// like any client-go reflector (up to a minute), and the next tests need
// the garbage collector and the namespace controller at once. While the
// apiserver runs it does nothing, so a test may call it again in a cleanup:
// a second start would replace the process envtest stops at the end, and
// leave the first one running after the tests.
func (e *Env) StartAPIServer() error {
	if !e.apiServerDown {
		return nil
	}
	if err := e.env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	e.apiServerDown = false
	if e.kcm != nil {
		return e.RestartControllerManager()
	}
	return nil
}

// RestartControllerManager restarts kube-controller-manager, whose garbage
// collector then starts with every resource type served. Its periodic
// rediscovery (every 30 seconds) can otherwise leave a CRD installed after
// Start unwatched for that long: in the TrainingJob suite, which installs
// its CRD through the chart, foreground cascades of TrainingJobs took 40
// seconds without the restart and under a second with it.
func (e *Env) RestartControllerManager() error {
	if e.kcm == nil {
		return errors.New("kube-controller-manager is not running (Options.ControllerManager)")
	}
	e.stopControllerManager()
	return e.startControllerManager(BinaryDir())
}

func (e *Env) stopControllerManager() {
	if e.kcm == nil || e.kcm.Process == nil {
		return
	}
	_ = e.kcm.Process.Signal(os.Interrupt)
	select {
	case <-e.kcmDone:
	case <-time.After(10 * time.Second):
		_ = e.kcm.Process.Kill()
		<-e.kcmDone
	}
}

// Stop stops every process and removes their files.
func (e *Env) Stop() error {
	var errs []error
	if e.stopRecording != nil {
		e.stopRecording()
	}
	e.stopControllerManager()
	if err := e.env.Stop(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(e.workDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (e *Env) startControllerManager(bin string) error {
	path := filepath.Join(bin, "kube-controller-manager")
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("kube-controller-manager missing in %s (run `make k8s-bin`): %w", bin, err)
	}
	cfg, err := e.AddUser("system:kube-controller-manager", "system:masters")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(e.workDir, "kube-controller-manager.kubeconfig")
	if err := WriteKubeconfig(cfg, kubeconfig); err != nil {
		return err
	}
	logPath := filepath.Join(e.workDir, "kube-controller-manager.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(path,
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(append([]string{"garbage-collector-controller", "namespace-controller", "persistentvolumeclaim-protection-controller"}, e.controllers...), ","),
		"--leader-elect=false",
		"--secure-port=0",
		// Namespace deletion waits for discovery of every API; resync
		// faster than the default so tests see cascades promptly.
		"--namespace-sync-period=10s",
		"--concurrent-gc-syncs=5",
		"--v=1",
	)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	e.kcm = cmd
	e.kcmDone = make(chan struct{})
	go func() {
		// The exit status is of no interest: tests stop it with a signal.
		_ = cmd.Wait()
		_ = logFile.Close()
		close(e.kcmDone)
	}()
	return nil
}

// WriteKubeconfig writes a kubeconfig file for cfg (client certificate or
// bearer token), for the programs tests start: kube-controller-manager, Helm,
// the Kubeflow training-operator.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// Main starts one control plane for a test package, runs its tests and stops
// it. Use it from TestMain:
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{...}, &env) }
func Main(m *testing.M, opts Options, out **Env) {
	if !opts.KeepLogger {
		CaptureLogs()
	}
	env, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	*out = env
	code := m.Run()
	if !opts.KeepLogger {
		if err := env.VerifyLogs(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			code = 1
		}
	}
	ReportLogs(code)
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping:", err)
	}
	os.Exit(code)
}
