package progress_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// pythonPath is where the PyTorch image installs the mlplatform package.
func pythonPath() string {
	return filepath.Join("..", "..", "..", "..", "images", "pytorch", "root", "usr", "lib", "python3", "dist-packages")
}

func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	return py
}

// TestPythonHelperReportsToTheEndpoint: the helper shipped in the PyTorch
// image, given the environment the operator injects and a real pod-bound
// token, reports a training whose final step lands in status.
func TestPythonHelperReportsToTheEndpoint(t *testing.T) {
	py := python(t)
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-python")
	dir, pool := certDir(t)
	ep := startOperator(t, dir, pool, nil)
	f := newJob(t, c, ns, "py")
	token := f.pod(t, c, cs, "py-r1-0", progress.Audience, rank(0), nil)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	script := `
from mlplatform import progress
for step in range(1, 21):
    progress.report(step=step, total=20, epoch=step // 10, metrics={"loss": 1.0 / step})
assert progress.flush(30), "final report not sent"
`
	cmd := exec.CommandContext(t.Context(), py, "-c", script)
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+pythonPath(),
		progress.EnvURL+"=https://localhost:"+portOf(t, ep.addr)+"/v1/namespaces/"+ns+"/trainingjobs/py/progress",
		progress.EnvTokenFile+"="+tokenFile,
		progress.EnvCA+"="+string(ca),
		"RANK=0",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python helper: %v\n%s", err, out)
	}
	got := waitStep(t, c, f, 20)
	if got.Percent == nil || *got.Percent != 100 || got.Metrics["loss"] != "0.05" || got.Epoch != 2 {
		t.Errorf("status.progress = %+v", got)
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

// TestPythonHelperUnitTests runs the helper's own tests (a local HTTPS
// server: Retry-After, coalescing, failures), so `make test` runs them.
func TestPythonHelperUnitTests(t *testing.T) {
	py := python(t)
	cmd := exec.CommandContext(t.Context(), py, "-m", "unittest", "discover", "-s", filepath.Join("..", "..", "..", "..", "images", "pytorch", "test"))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
}
