package progress_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// pythonPath is the progress helper's source folder, which the platform's
// images copy into their dist-packages.
func pythonPath() string {
	return filepath.Join(testenv.RepoRoot(), "python", "mlplatform-progress", "src")
}

// python is Debian's Python, which the images run; the python3 first on
// PATH may be another one.
func python(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(py); err == nil {
			return path
		}
	}
	t.Skip("python3 is not installed")
	return ""
}

// helperRun runs the progress helper against a live endpoint as one pod
// of a TrainingJob, with that pod's token and the launcher's environment.
type helperRun struct {
	py, url, ca, tokenFile string
}

func newHelperRun(t *testing.T, py string, ep *endpoint, ns, job, token string) helperRun {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "https://localhost:" + portOf(t, ep.addr) + "/v1/namespaces/" + ns + "/trainingjobs/" + job + "/progress"
	// The CA is the one the operator injects into pods.
	return helperRun{py: py, url: url, ca: ep.Endpoint.CA(), tokenFile: tokenFile}
}

// run runs script with the launcher's variables and returns its stderr,
// where the helper writes every warning (a refused report included).
func (h helperRun) run(t *testing.T, script string, launcher ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), h.py, "-c", script)
	env := []string{"PYTHONPATH=" + pythonPath(), progress.EnvURL + "=" + h.url, progress.EnvTokenFile + "=" + h.tokenFile, progress.EnvCA + "=" + h.ca}
	for _, e := range os.Environ() {
		if name, _, _ := strings.Cut(e, "="); !slices.Contains([]string{"RANK", "TF_CONFIG", "JAX_PROCESS_ID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "DMLC_TASK_ID", "PYTHONPATH"}, name) {
			env = append(env, e)
		}
	}
	env = append(env, launcher...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python helper: %v\n%s", err, stderr.String())
	}
	return stderr.String()
}

// TestPythonHelperReportsToTheEndpoint: the helper shipped in the
// platform's images (python/mlplatform-progress, whose own tests run in
// make test-python), given the environment the operator injects and a
// real pod-bound token, reports a training whose final step lands in
// status.
func TestPythonHelperReportsToTheEndpoint(t *testing.T) {
	py := python(t)
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-python")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, nil)
	f := newJob(t, c, ns, "py")
	h := newHelperRun(t, py, ep, ns, "py", f.pod(t, c, cs, "py-r1-0", progress.Audience, rank(0), nil))
	h.run(t, `
from mlplatform import progress
for step in range(1, 21):
    progress.report(step=step, total=20, epoch=step // 10, metrics={"loss": 1.0 / step})
assert progress.flush(30), "final report not sent"
`, "RANK=0")
	got := waitStep(t, c, f, 20)
	if got.Percent == nil || *got.Percent != 100 || got.Metrics["loss"] != "0.05" || got.Epoch != 2 {
		t.Errorf("status.progress = %+v", got)
	}
}

// TestPythonHelperOnTensorFlowReportsFromWorkerZeroOnly: every process of
// a native TensorFlow job runs the same code with only TF_CONFIG to tell
// them apart (no RANK). Worker 1 sends nothing, so the endpoint refuses
// nothing and the training's log gets no 403 warning; worker 0, the chief
// TensorFlow chooses, reports.
func TestPythonHelperOnTensorFlowReportsFromWorkerZeroOnly(t *testing.T) {
	py := python(t)
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-python-tf")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, nil)
	f := newJob(t, c, ns, "tf")
	tfConfig := func(index int) string {
		return `TF_CONFIG={"cluster":{"worker":["tf-r1-0.trainingjob-ranks.` + ns + `.svc:2222","tf-r1-1.trainingjob-ranks.` + ns + `.svc:2222"]},"task":{"type":"worker","index":` + strconv.Itoa(index) + `},"environment":"cloud"}`
	}
	script := `
from mlplatform import progress
for step in range(1, 6):
    progress.report(step=step, total=%d)
assert progress.flush(30), "report not sent"
`
	worker1 := newHelperRun(t, py, ep, ns, "tf", f.pod(t, c, cs, "tf-r1-1", progress.Audience, rank(1), nil))
	if stderr := worker1.run(t, fmt.Sprintf(script, 10), tfConfig(1)); stderr != "" {
		t.Errorf("worker 1 of a TensorFlow job wrote warnings; it must not report at all:\n%s", stderr)
	}
	worker0 := newHelperRun(t, py, ep, ns, "tf", f.pod(t, c, cs, "tf-r1-0", progress.Audience, rank(0), nil))
	if stderr := worker0.run(t, fmt.Sprintf(script, 5), tfConfig(0)); stderr != "" {
		t.Errorf("worker 0 wrote warnings:\n%s", stderr)
	}
	// Worker 1's script says total 10: a status with total 5 shows
	// worker 0's reports alone.
	if got := waitStep(t, c, f, 5); got.TotalSteps != 5 {
		t.Errorf("status.progress = %+v, want worker 0's reports only", got)
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	return port
}
