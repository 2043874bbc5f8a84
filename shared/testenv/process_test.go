package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// helperModeEnv makes the test binary run helperProcess instead of tests.
const helperModeEnv = "MLP_TESTENV_HELPER_MODE"

// helperProcess is the helper process of these tests: "listen" serves TCP
// on $PORT until it is signalled, "exit" fails at once with a message.
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
