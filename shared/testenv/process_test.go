package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// helperModeEnv makes the test binary run helperProcess instead of tests.
const helperModeEnv = "MLP_TESTENV_HELPER_MODE"

// helperProcess is the helper process of these tests: "listen" serves TCP
// on $PORT until it is signalled, "env" starts an Env, prints its folder
// and waits to be killed, "process" does the same with a Process serving
// as "listen" and its process id, "exit" fails at once with a message.
func helperProcess(mode string) int {
	switch mode {
	case "listen":
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", os.Getenv("PORT")))
		if err != nil {
			fmt.Println("listen:", err)
			return 1
		}
		fmt.Println("serving on", l.Addr())
		for {
			conn, err := l.Accept()
			if err != nil {
				return 1
			}
			_ = conn.Close()
		}
	case "env":
		e, err := Start(Options{ControllerManager: true})
		if err != nil {
			fmt.Println("env:", err)
			return 1
		}
		fmt.Println("workdir", e.workDir)
		select {}
	case "process":
		p, err := StartProcess(ProcessOptions{Name: "listener", Command: helperCommand("listen")})
		if err != nil {
			fmt.Println("process:", err)
			return 1
		}
		fmt.Println("server", p.cmd.Process.Pid)
		select {}
	default:
		fmt.Println("helper: no configuration for mode", mode)
		return 3
	}
}

func helperCommand(mode string) func(port int) (*exec.Cmd, error) {
	return func(port int) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, "PORT="+strconv.Itoa(port))
		return cmd, nil
	}
}

func TestProcessStartsStopsAndRestartsOnItsPort(t *testing.T) {
	p, err := StartProcess(ProcessOptions{Name: "listener", Command: helperCommand("listen")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	if err := dial(p.Port); err != nil || !p.Running() {
		t.Fatalf("after StartProcess: dial %v, running %v", err, p.Running())
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := dial(p.Port); err == nil || p.Running() {
		t.Fatalf("after Stop: port %d still answers (running %v)", p.Port, p.Running())
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
	port := p.Port
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if p.Port != port || dial(p.Port) != nil {
		t.Fatalf("restarted on port %d (was %d), dial %v", p.Port, port, dial(p.Port))
	}
	if n := strings.Count(p.Log(), "serving on 127.0.0.1:"+strconv.Itoa(port)); n != 2 {
		t.Errorf("the log holds %d starts on port %d, want 2: %q", n, port, p.Log())
	}
}

func TestProcessThatExitsEarlyFailsWithItsOutput(t *testing.T) {
	_, err := StartProcess(ProcessOptions{Name: "broken", Command: helperCommand("exit")})
	if err == nil {
		t.Fatal("StartProcess of a process that exits at once succeeded")
	}
	for _, want := range []string{"broken exited before it served", "no configuration for mode exit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestProcessWaitsForReady(t *testing.T) {
	var calls atomic.Int32
	p, err := StartProcess(ProcessOptions{
		Name:    "slow starter",
		Command: helperCommand("listen"),
		Ready: func(context.Context) error {
			if calls.Add(1) < 5 {
				return errors.New("still loading")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	if n := calls.Load(); n != 5 {
		t.Errorf("Ready was asked %d times, want 5 (until it said yes)", n)
	}
}

func TestProcessCommandErrorIsReported(t *testing.T) {
	_, err := StartProcess(ProcessOptions{Name: "missing", Command: func(int) (*exec.Cmd, error) {
		return nil, errors.New("binary not installed")
	}})
	if err == nil || !strings.Contains(err.Error(), "missing: binary not installed") {
		t.Fatalf("error %v, want the command's error", err)
	}
}

// startHelper runs the test binary as helperProcess in mode and returns
// it with the rest of the first line it prints that starts with prefix.
func startHelper(t *testing.T, mode, prefix string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	scanner := bufio.NewScanner(out)
	for scanner.Scan() {
		if rest, ok := strings.CutPrefix(scanner.Text(), prefix); ok {
			return cmd, rest
		}
		t.Log("helper:", scanner.Text())
	}
	t.Fatalf("the helper in mode %s printed no line starting with %q", mode, prefix)
	return nil, ""
}

// TestServersDoNotOutliveADeadTestBinary kills a test binary that runs an
// Env, as a panic or `go test -timeout` would end it, without its cleanup:
// etcd, kube-apiserver and kube-controller-manager stop, and the Env's
// folder goes.
func TestServersDoNotOutliveADeadTestBinary(t *testing.T) {
	cmd, dir := startHelper(t, "env", "workdir ")
	servers := func() []string {
		var found []string
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			cmdline, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(cmdline), dir+"/") {
				found = append(found, strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " "))[0])
			}
		}
		return found
	}
	if got := servers(); len(got) < 3 {
		t.Fatalf("servers naming %s while the helper runs: %v, want etcd, kube-apiserver and kube-controller-manager", dir, got)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, statErr := os.Stat(dir)
		return len(servers()) == 0 && os.IsNotExist(statErr), nil
	})
	if err != nil {
		_, statErr := os.Stat(dir)
		t.Fatalf("30 s after the test binary died: servers %v still run, folder %s: %v", servers(), dir, statErr)
	}
}

// TestHelperServerDoesNotOutliveADeadTestBinary does the same to a test
// binary that runs a helper server (a Process): the server's process group
// is killed.
func TestHelperServerDoesNotOutliveADeadTestBinary(t *testing.T) {
	cmd, pid := startHelper(t, "process", "server ")
	server, err := strconv.Atoi(pid)
	if err != nil || server <= 0 {
		t.Fatalf("the helper's server pid %q", pid)
	}
	t.Cleanup(func() { _ = syscall.Kill(-server, syscall.SIGKILL) })
	if !alive(server) {
		t.Fatalf("server %d is not running while the helper runs", server)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return !alive(server), nil
	})
	if err != nil {
		t.Fatalf("30 s after the test binary died, its server %d still runs", server)
	}
}

// alive reports whether process pid runs: it exists and is no zombie (a
// container's first process may never reap an orphan).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}
