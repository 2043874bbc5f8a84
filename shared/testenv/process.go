package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ProcessOptions describe a server a test runs as a separate process on a
// loopback port: a database, a Jupyter server, another operator's binary.
type ProcessOptions struct {
	// Name says what runs, in errors.
	Name string

	// Command returns the command to run, serving on 127.0.0.1:port. It is
	// called on every start, always with the same port, so that clients
	// reconnect to a restarted server where they left it. Its SysProcAttr
	// may set Credential; Setpgid is always set.
	Command func(port int) (*exec.Cmd, error)

	// Port is the port to serve on; zero picks a free one.
	Port int

	// Ready returns nil once the process serves; nil means once its port
	// accepts connections. NoWait skips the wait, for a process that only
	// serves after something the caller does next.
	Ready  func(ctx context.Context) error
	NoWait bool

	// StopSignal is sent to the process group to stop it: SIGTERM if zero.
	StopSignal syscall.Signal

	// Log receives the process's output besides Log(); nil keeps it only
	// in memory.
	Log io.Writer
}

// Process is a running helper process, started by StartProcess.
type Process struct {
	// Port is where the process serves, on 127.0.0.1.
	Port int

	opts ProcessOptions
	log  LogBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// processReadyTimeout bounds how long a process may take to serve; the
// machines that run tests are slow and shared.
const processReadyTimeout = 90 * time.Second

// processStopTimeout is how long a process gets to exit after StopSignal
// before it is killed.
const processStopTimeout = 15 * time.Second

// StartProcess starts the process and waits until it serves.
func StartProcess(opts ProcessOptions) (*Process, error) {
	if opts.Command == nil {
		return nil, errors.New("testenv: ProcessOptions.Command is required")
	}
	p := &Process{Port: opts.Port, opts: opts}
	if p.Port == 0 {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		p.Port = port
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Start starts the process again on its port after Stop, and waits until
// it serves; on a running process it does nothing.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	cmd, err := p.opts.Command(p.Port)
	if err != nil {
		return fmt.Errorf("%s: %w", p.opts.Name, err)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Its own process group lets Stop reach the children a server forks
	// (kernels, backends) too.
	cmd.SysProcAttr.Setpgid = true
	var out io.Writer = &p.log
	if p.opts.Log != nil {
		out = io.MultiWriter(&p.log, p.opts.Log)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.opts.Name, err)
	}
	if err := reapGroupAfterExit(cmd.Process.Pid); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fmt.Errorf("watching %s: %w", p.opts.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	if p.opts.NoWait {
		return nil
	}
	if err := p.waitReady(done); err != nil {
		return errors.Join(err, p.stopLocked())
	}
	return nil
}

func (p *Process) waitReady(done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), processReadyTimeout)
	defer cancel()
	ready := p.opts.Ready
	if ready == nil {
		ready = func(context.Context) error { return dial(p.Port) }
	}
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before it served: %w\n%s", p.opts.Name, err, p.Log())
		case <-ctx.Done():
			return fmt.Errorf("%s did not serve within %s: %w\n%s", p.opts.Name, processReadyTimeout, err, p.Log())
		case <-ticker.C:
		}
	}
}

// Stop stops the process (StopSignal to its group, SIGKILL if it has not
// exited after 15 s) and waits until its port is closed; on a stopped
// process it does nothing.
func (p *Process) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopLocked()
}

func (p *Process) stopLocked() error {
	if p.cmd == nil {
		return nil
	}
	sig := p.opts.StopSignal
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	select {
	case <-p.done:
	case <-time.After(processStopTimeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children that outlived the leader would keep the port.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	p.cmd = nil
	return WaitPortClosed(p.Port, 30*time.Second)
}

// Running reports whether the process was started and not stopped, and has
// not exited by itself.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Log returns everything the process printed, over every start.
func (p *Process) Log() string { return p.log.String() }

// FreePort asks the kernel for a free loopback port. Another process could
// take it before the server binds it; the server's start fails loudly then.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("not a TCP address: %s", l.Addr())
	}
	return addr.Port, nil
}

// WaitPortClosed polls until nothing accepts connections on the loopback
// port any more, or fails after timeout.
func WaitPortClosed(port int, timeout time.Duration) error {
	return waitClosed(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), timeout)
}

func waitClosed(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if dialAddr(addr) != nil {
			// Refused: the server is down, which is what the caller waits for.
			return nil //nolint:nilerr // a failed dial is the success here
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s still accepts connections %s after its server was stopped", addr, timeout)
}

func dial(port int) error { return dialAddr(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))) }

func dialAddr(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}
