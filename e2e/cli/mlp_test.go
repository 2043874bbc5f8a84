package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ml-platform/ml-platform/e2e/cluster"
)

// mlpBin is the mlp built from this tree for the suite (TestMain).
var mlpBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(cluster.E2EEnv) != "1" {
		return m.Run() // every test skips in steps.Connect
	}
	dir, err := os.MkdirTemp("", "e2e-mlp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	mlpBin = filepath.Join(dir, "mlp")
	// Built in its own module's folder, so that it builds with or without
	// the workspace.
	build := exec.Command("go", "build", "-o", mlpBin, "./cmd/mlp")
	build.Dir = filepath.Join("..", "..", "tools", "mlp")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building mlp: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// mlp runs the CLI with args in ns (KUBECONFIG comes from the environment,
// as for a user) and returns its combined output and exit code.
func mlp(t *testing.T, timeout time.Duration, ns string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, mlpBin, append([]string{"-n", ns}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("mlp %v: %v (output %q)", args, err, out.String())
	}
	t.Logf("mlp %v: exit %d\n%s", args, code, out.String())
	return out.String(), code
}
