package training

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// debianPython is the interpreter the contract program runs with in the
// pods; the test runs it the same way on loopback.
const debianPython = "/usr/bin/python3"

// localContract runs testdata/contract.py once per environment, all at
// once (they are ranks of one job), and returns each one's RESULT.
func localContract(t *testing.T, framework string, envs ...map[string]string) []contractResult {
	t.Helper()
	program := filepath.Join(t.TempDir(), "contract.py")
	if err := os.WriteFile(program, []byte(contractProgram), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	results := make([]contractResult, len(envs))
	var wg sync.WaitGroup
	for i, env := range envs {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, debianPython, program, framework)
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"PATH=/usr/bin:/bin", "CONTRACT_TIMEOUT_SECONDS=5"}
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, _ := cmd.Output()
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if line, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
					if err := json.Unmarshal([]byte(line), &results[i]); err != nil {
						t.Errorf("rank %d: %q: %v", i, line, err)
					}
					return
				}
			}
			t.Errorf("rank %d printed no RESULT: %s", i, out)
		})
	}
	wg.Wait()
	return results
}

// loopback returns the address this machine's hostname resolves to (the
// program compares a rank's own address with it, as a pod's hostname
// resolves to its IP) and n free ports on it, each with the port after it
// free too: a rank binds its coordinator's port + 1 (JAX, Paddle), which a
// port that was free alone left to chance (a client's ephemeral port held
// it once, and the run failed with EADDRINUSE).
func loopback(t *testing.T, n int) (string, []int) {
	t.Helper()
	out, err := exec.Command(debianPython, "-c", "import socket; print(socket.gethostbyname(socket.gethostname()))").Output()
	if err != nil {
		t.Fatal(err)
	}
	ip := strings.TrimSpace(string(out))
	if !net.ParseIP(ip).IsLoopback() {
		t.Skipf("the hostname resolves to %s, not to a loopback address", ip)
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100 {
			t.Fatalf("no two free consecutive ports on %s in 100 tries", ip)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		next, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port+1)))
		if err != nil {
			_ = l.Close()
			continue
		}
		ports = append(ports, port)
		defer l.Close()
		defer next.Close()
	}
	return ip, ports
}

func tfConfigOf(cluster map[string][]string, kind string, index int) map[string]string {
	b, _ := json.Marshal(map[string]any{"cluster": cluster, "task": map[string]any{"type": kind, "index": index}})
	return map[string]string{"TF_CONFIG": string(b)}
}

// TestContractProgramChecksTheDocumentedEnvironment runs the contract
// program on loopback: a TensorFlow cluster of a chief and two workers
// proves itself, and each documented rule it enforces refuses an
// environment that breaks it.
func TestContractProgramChecksTheDocumentedEnvironment(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Skipf("no %s: %v", debianPython, err)
	}
	ip, ports := loopback(t, 4)
	addr := func(i int) string { return net.JoinHostPort(ip, strconv.Itoa(ports[i])) }
	cluster := map[string][]string{"chief": {addr(0)}, "worker": {addr(1), addr(2)}}

	t.Run("tensorflow chief and two workers", func(t *testing.T) {
		got := localContract(t, "tensorflow", tfConfigOf(cluster, "chief", 0), tfConfigOf(cluster, "worker", 0), tfConfigOf(cluster, "worker", 1))
		want := [][]string{{"worker:0", "worker:1"}, {"chief:0", "worker:1"}, {"chief:0", "worker:0"}}
		for i, r := range got {
			if !r.OK || r.Rank != i || r.World != 3 || !cmp.Equal(want[i], r.Reached) || !cmp.Equal(want[i], r.ReachedBy) {
				t.Errorf("rank %d: %+v; want ok, rank %d of 3, reaching and reached by %v", i, r, i, want[i])
			}
		}
	})

	refused := map[string]struct {
		framework string
		env       map[string]string
		wantError string
	}{
		"tensorflow index outside its job": {"tensorflow", tfConfigOf(cluster, "worker", 2), "task index 2 outside job worker of 2"},
		"tensorflow task of no job":        {"tensorflow", tfConfigOf(cluster, "evaluator", 0), "is not a job of the cluster"},
		"tensorflow two chiefs": {"tensorflow", tfConfigOf(map[string][]string{"chief": {addr(0), addr(1)}}, "chief", 0),
			"more than one chief"},
		"tensorflow own address elsewhere": {"tensorflow", tfConfigOf(map[string][]string{"worker": {"192.0.2.1:" + strconv.Itoa(ports[0])}}, "worker", 0),
			"not this pod's"},
		"tensorflow a peer nobody answers for": {"tensorflow", tfConfigOf(map[string][]string{"worker": {addr(0), addr(3)}}, "worker", 0),
			"cannot reach worker:1"},
		"paddle without PADDLE_NNODES": {"paddle", map[string]string{"PADDLE_MASTER": addr(0), "PADDLE_JOB_ID": "j"}, "PADDLE_NNODES"},
		"paddle master without a port": {"paddle", map[string]string{"PADDLE_MASTER": ip, "PADDLE_NNODES": "1", "PADDLE_JOB_ID": "j"}, "is not host:port"},
		"jax without a coordinator":    {"jax", map[string]string{"JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "0"}, "JAX_COORDINATOR_ADDRESS is not set"},
		"jax coordinator without a port": {"jax", map[string]string{"JAX_COORDINATOR_ADDRESS": ip, "JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "0"},
			"is not host:port"},
		"jax port not the address's": {"jax", jaxEnv(addr(0), ports[1], 1, 0), "is not the port of JAX_COORDINATOR_ADDRESS"},
		"jax process id outside":     {"jax", jaxEnv(addr(0), ports[0], 2, 2), "JAX_PROCESS_ID 2 outside 0..1"},
		"jax no processes":           {"jax", jaxEnv(addr(0), ports[0], 0, 0), "JAX_NUM_PROCESSES '0' is not an integer of at least 1"},
		"jax process 1 on the coordinator's address": {"jax", jaxEnv(addr(0), ports[0], 2, 1),
			"resolves to process 1's own pod"},
		"jax process 0 elsewhere": {"jax", jaxEnv("192.0.2.1:"+strconv.Itoa(ports[0]), ports[0], 2, 0), "not to process 0's pod"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			r := localContract(t, tc.framework, tc.env)[0]
			if r.OK || !strings.Contains(r.Error, tc.wantError) {
				t.Errorf("ok %t, error %q; want an error containing %q", r.OK, r.Error, tc.wantError)
			}
		})
	}

	t.Run("jax alone is its own coordinator", func(t *testing.T) {
		r := localContract(t, "jax", jaxEnv(addr(0), ports[0], 1, 0))[0]
		var env jaxFacts
		if err := json.Unmarshal(r.Env, &env); err != nil {
			t.Fatal(err)
		}
		if !r.OK || !env.Coordinator || r.Identity != "process:0" || r.World != 1 || env.Address != addr(0) {
			t.Errorf("%+v, %+v: want ok, process 0 of 1, the coordinator at %s", r, env, addr(0))
		}
	})

	t.Run("paddle alone is its own master", func(t *testing.T) {
		r := localContract(t, "paddle", map[string]string{"PADDLE_MASTER": addr(0), "PADDLE_NNODES": "1", "PADDLE_JOB_ID": "j"})[0]
		var env paddleEnv
		if err := json.Unmarshal(r.Env, &env); err != nil {
			t.Fatal(err)
		}
		self := net.JoinHostPort(ip, strconv.Itoa(ports[0]+1))
		want := map[string]string{"PADDLE_TRAINER_ENDPOINTS": self, "PADDLE_CURRENT_ENDPOINT": self, "PADDLE_TRAINER_ID": "0", "PADDLE_TRAINERS_NUM": "1"}
		if !r.OK || !env.IsMaster || r.Identity != "trainer:0" {
			t.Errorf("%+v: want ok, the master, trainer 0", r)
		}
		if diff := cmp.Diff(want, env.Derived); diff != "" {
			t.Errorf("collective variables (-want +got):\n%s", diff)
		}
	})
}

// jaxEnv is the environment of JAX process id of n whose coordinator is
// at address, with JAX_COORDINATOR_PORT port.
func jaxEnv(address string, port, n, id int) map[string]string {
	return map[string]string{
		"JAX_COORDINATOR_ADDRESS": address, "JAX_COORDINATOR_PORT": strconv.Itoa(port),
		"JAX_NUM_PROCESSES": strconv.Itoa(n), "JAX_PROCESS_ID": strconv.Itoa(id),
	}
}
