package backends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// The users the components authenticate as. The audit log names them, which
// is how writes are attributed to a component.
const (
	userBench      = "bench"
	userKCM        = "system:kube-controller-manager"
	userScheduler  = "system:kube-scheduler"
	userKwok       = "kwok"
	userOperator   = "trainingjob-operator"
	userKubeflow   = "kubeflow-training-operator"
	nodeAnnotation = "kwok.x-k8s.io/node"
)

// cluster is the benchmark's control plane and the processes around it.
type cluster struct {
	env      *testenv.Env
	workDir  string
	auditLog string
	bench    client.Client
	benchCfg *rest.Config
	procs    []*process
	kubeflow *harness.Kubeflow

	// operatorMetrics and kubeflowMetrics are the operators' /metrics URLs.
	operatorMetrics, kubeflowMetrics string
	// operators are the binary, built once, and the user's kubeconfig of
	// each operator the benchmark ran, by user.
	operators map[string][2]string
}

// startCluster starts etcd and kube-apiserver (with the write audit log),
// kube-controller-manager with the Job controller, kube-scheduler and kwok,
// creates the simulated nodes, then starts the Kubeflow training-operator
// and our operator, each as its own process and user.
func startCluster(ctx context.Context, s settings) (*cluster, error) {
	workDir, err := os.MkdirTemp("", "mlp-bench-backends-")
	if err != nil {
		return nil, err
	}
	c := &cluster{workDir: workDir, auditLog: filepath.Join(workDir, "audit.log")}
	policy, err := filepath.Abs(filepath.Join("testdata", "audit-policy.yaml"))
	if err != nil {
		return nil, err
	}
	files := filepath.Join("..", "..", "..", "..", "charts", "trainingjob-operator", "files")
	c.env, err = testenv.Start(testenv.Options{
		CRDDirectoryPaths: append([]string{filepath.Join(files, "crds"), filepath.Join(files, "kubeflow-crds")}, s.extraCRDDirs...),
		APIServerArgs: map[string][]string{
			"audit-policy-file": {policy},
			"audit-log-path":    {c.auditLog},
			// Batching keeps the log's disk writes off the request path, as
			// production clusters configure it.
			"audit-log-mode": {"batch"},
			// The API server rotates its log at 100 MB by default, which a
			// scale run passes in minutes; the reader follows one file.
			"audit-log-maxsize": {"1000000"},
			// envtest's /24 holds 254 Services; a Notebook has one.
			"service-cluster-ip-range": {"10.96.0.0/16"},
		},
	})
	if err != nil {
		return nil, err
	}
	if err := c.start(ctx, s); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *cluster) start(ctx context.Context, s settings) error {
	var err error
	if c.benchCfg, err = c.env.AddUser(userBench, "system:masters"); err != nil {
		return err
	}
	// The benchmark's own client must never be what limits a run.
	c.benchCfg.QPS, c.benchCfg.Burst = 5000, 10000
	if c.bench, err = client.New(c.benchCfg, client.Options{Scheme: harness.Scheme()}); err != nil {
		return err
	}
	steps := []func(context.Context, settings) error{c.startControllerManager, c.startScheduler, c.startKwok, c.createNodes}
	if !s.withoutOperators {
		steps = append(steps, c.startKubeflow, c.startOperator)
	}
	for _, step := range steps {
		if err := step(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// kubeconfig writes a kubeconfig of a new system:masters user.
func (c *cluster) kubeconfig(user string) (string, error) {
	cfg, err := c.env.AddUser(user, "system:masters")
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.workDir, strings.ReplaceAll(user, ":", "-")+".kubeconfig")
	return path, testenv.WriteKubeconfig(cfg, path)
}

func (c *cluster) startControllerManager(_ context.Context, s settings) error {
	kc, err := c.kubeconfig(userKCM)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kc,
		// The Job controller creates the native backend's pods; the
		// endpoints controllers maintain the Services both backends create
		// (as in a real cluster, their writes count); the garbage collector,
		// TTL and pod GC controllers clean up as in a real cluster.
		"--controllers=job-controller,garbage-collector-controller,namespace-controller," +
			"ttl-after-finished-controller,pod-garbage-collector-controller,endpoints-controller,endpointslice-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}
	args = append(args, clientLimits(s.kcmQPS, s.kcmBurst)...)
	if s.jobSyncs > 0 {
		args = append(args, fmt.Sprintf("--concurrent-job-syncs=%d", s.jobSyncs))
	}
	args = append(args, s.kcmArgs...)
	p, err := c.startProcess("kube-controller-manager", filepath.Join(testenv.BinaryDir(), "kube-controller-manager"), nil, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// clientLimits are a control-plane component's client flags: none when qps
// is 0 (its defaults), else qps and burst, twice qps unless set.
func clientLimits(qps, burst int) []string {
	if qps <= 0 {
		if burst > 0 {
			return []string{fmt.Sprintf("--kube-api-burst=%d", burst)}
		}
		return nil
	}
	if burst <= 0 {
		burst = 2 * qps
	}
	return []string{fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", burst)}
}

func (c *cluster) startScheduler(_ context.Context, s settings) error {
	kc, err := c.kubeconfig(userScheduler)
	if err != nil {
		return err
	}
	// Without --config, kube-scheduler still honours its deprecated client
	// flags.
	args := append([]string{"--kubeconfig=" + kc, "--leader-elect=false", "--secure-port=0", "--v=1"}, clientLimits(s.schedQPS, s.schedBurst)...)
	p, err := c.startProcess("kube-scheduler", filepath.Join(testenv.BinaryDir(), "kube-scheduler"), nil, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

func (c *cluster) startKwok(_ context.Context, s settings) error {
	bin, err := scriptOutput(filepath.Join(testenv.RepoRoot(), "operators", "trainingjob", "hack", "kwok-bin.sh"))
	if err != nil {
		return err
	}
	kc, err := c.kubeconfig(userKwok)
	if err != nil {
		return err
	}
	stages, err := c.writeStages(s.podRuntime)
	if err != nil {
		return err
	}
	p, err := c.startProcess("kwok", bin, nil,
		"--kubeconfig="+kc, "--config="+stages,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector="+nodeAnnotation+"=fake",
		"--cidr=10.128.0.0/10", "--node-ip=10.127.0.1",
		// A kubelet renews its lease every quarter of the lease duration;
		// 300 s (a renewal every 75 s) keeps a few hundred nodes' heartbeats
		// to a few writes per second, which the reports name separately.
		"--node-lease-duration-seconds=300")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

func (c *cluster) writeStages(podRuntime time.Duration) (string, error) {
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "kwok-stages.yaml"))
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, map[string]int64{"PodRunMillis": podRuntime.Milliseconds()}); err != nil {
		return "", err
	}
	path := filepath.Join(c.workDir, "kwok-stages.yaml")
	return path, os.WriteFile(path, buf.Bytes(), 0o600)
}

// createNodes creates the simulated GPU nodes with their capacity in
// status, as a kubelet registers itself; kwok then keeps them Ready.
func (c *cluster) createNodes(ctx context.Context, s settings) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      resource.MustParse("8"),
	}
	err := parallel(ctx, s.nodes, 16, func(ctx context.Context, i int) error {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-gpu-%03d", i),
				Annotations: map[string]string{nodeAnnotation: "fake"},
				Labels:      map[string]string{"type": "kwok", corev1.LabelHostname: fmt.Sprintf("kwok-gpu-%03d", i)},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		return c.bench.Create(ctx, node)
	})
	if err != nil {
		return err
	}
	// Pods submitted before kwok marks the nodes Ready would wait out the
	// scheduler's backoff and distort the first latencies. The API server
	// taints every new node not-ready; the node lifecycle controller, which
	// would lift the taint, is not run (it would also judge kwok's sparse
	// lease renewals as lost nodes), so the benchmark lifts it.
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive(); err != nil {
			return false, err
		}
		nodes := &corev1.NodeList{}
		if err := c.bench.List(ctx, nodes, client.MatchingLabels{"type": "kwok"}); err != nil {
			return false, err
		}
		ready := 0
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if len(n.Spec.Taints) > 0 {
				n.Spec.Taints = nil
				if err := c.bench.Update(ctx, n); err != nil && !apierrors.IsConflict(err) {
					return false, err
				}
				continue
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == s.nodes, nil
	})
}

func (c *cluster) startKubeflow(ctx context.Context, _ settings) error {
	bin, err := harness.KubeflowBinary(testenv.RepoRoot())
	if err != nil {
		return err
	}
	cfg, err := c.env.AddUser(userKubeflow, "system:masters")
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	// Kubeflow runs with its defaults (one worker, controller-runtime's
	// client limits of 20 QPS and burst 30), as its chart deploys it.
	c.kubeflow, err = harness.StartKubeflow(ctx, cfg, c.bench, bin, c.workDir, "--metrics-bind-address="+addr)
	c.kubeflowMetrics = "http://" + addr + "/metrics"
	return err
}

// startOperator builds cmd/ and runs it as its own process, so that its CPU
// time and heap are its own, with the flags under study.
func (c *cluster) startOperator(_ context.Context, s settings) error {
	p, metrics, err := c.runOperator("trainingjob-operator", append([]string{"--leader-elect=false"}, s.operatorArgs...)...)
	if err != nil {
		return err
	}
	c.operatorMetrics = metrics
	c.procs = append(c.procs, p)
	return nil
}

// runOperator starts our operator as the process name (its log file's
// name), building it on the first call, with metrics on plain HTTP at the
// URL it returns and the flags under study after the benchmark's own.
func (c *cluster) runOperator(name string, args ...string) (*process, string, error) {
	return c.runOperatorOf(".", userOperator, name, args...)
}

// runOperatorOf is runOperator of the operator built from dir (relative to
// operators/trainingjob), named user in the audit log.
func (c *cluster) runOperatorOf(dir, user, name string, args ...string) (*process, string, error) {
	if c.operators == nil {
		c.operators = map[string][2]string{}
	}
	built, ok := c.operators[user]
	if !ok {
		bin := filepath.Join(c.workDir, user)
		build := exec.Command("go", "build", "-o", bin, "./cmd")
		build.Dir = filepath.Join("..", "..", dir)
		if out, err := build.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("building %s: %w: %s", user, err, out)
		}
		kc, err := c.kubeconfig(user)
		if err != nil {
			return nil, "", err
		}
		built = [2]string{bin, kc}
		c.operators[user] = built
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	probes, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args = append([]string{
		"--metrics-secure=false", "--metrics-bind-address=" + addr, "--health-probe-bind-address=" + probes, "--zap-log-level=error",
	}, args...)
	p, err := c.startProcess(name, built[0], []string{"KUBECONFIG=" + built[1]}, args...)
	if p != nil {
		p.readyz = "http://" + probes + "/readyz"
	}
	return p, "http://" + addr + "/metrics", err
}

func (c *cluster) stop() {
	if c.kubeflow != nil {
		_ = c.kubeflow.Stop()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	if c.env != nil {
		_ = c.env.Stop()
	}
	if os.Getenv("MLP_BENCH_KEEP") == "" {
		_ = os.RemoveAll(c.workDir)
	}
}

// process is a component the benchmark started, logging to a file in the
// work folder.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// readyz is an operator's readiness endpoint, as the kubelet probes it.
	readyz string
}

func (c *cluster) startProcess(name, bin string, env []string, args ...string) (*process, error) {
	logFile, err := os.Create(filepath.Join(c.workDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		// The exit status is of no interest: the benchmark stops them.
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process already ended, which makes every
// figure after that meaningless.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// checkAlive fails once any started component has died.
func (c *cluster) checkAlive() error {
	var errs []error
	for _, p := range c.procs {
		if p.exited() {
			errs = append(errs, fmt.Errorf("%s exited (log %s)", p.name, filepath.Join(c.workDir, p.name+".log")))
		}
	}
	return errors.Join(errs...)
}

func scriptOutput(path string) (string, error) {
	out, err := exec.Command(path).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("%s: %w: %s", path, err, exit.Stderr)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}
