package jupytertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// Python is Debian's interpreter, which has the jupyter-server package; the
// python3 first on PATH may be another installation without it.
const Python = "/usr/bin/python3"

// Server is a running Jupyter server.
type Server struct {
	// BaseURL ends with a slash, e.g. http://127.0.0.1:PORT/notebook/ns/nb/.
	BaseURL string
	Token   string

	dir     string
	process *testenv.Process
}

// Start runs `python3 -m jupyter_server` on a free loopback port with a
// random token and the given base URL path (for example
// "/notebook/team/nb/"), and waits until it answers.
func Start(basePath string) (*Server, error) {
	if _, err := os.Stat(Python); err != nil {
		return nil, fmt.Errorf("%s missing: install the test dependencies (operators/notebook/hack/test-deps.sh): %w", Python, err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "jupytertest-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		BaseURL: fmt.Sprintf("http://127.0.0.1:%d%s", port, basePath),
		Token:   randomHex(16),
		dir:     dir,
	}
	s.process, err = testenv.StartProcess(testenv.ProcessOptions{
		Name:    "jupyter_server",
		Port:    port,
		Command: func(port int) (*exec.Cmd, error) { return s.command(port, basePath), nil },
		Ready: func(ctx context.Context) error {
			var st map[string]any
			return s.Get(ctx, "api/status?no_track_activity=1", &st)
		},
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) command(port int, basePath string) *exec.Cmd {
	args := []string{"-m", "jupyter_server",
		"--ServerApp.ip=127.0.0.1",
		"--ServerApp.port=" + strconv.Itoa(port),
		"--ServerApp.port_retries=0",
		"--ServerApp.base_url=" + basePath,
		"--ServerApp.root_dir=" + s.dir,
		"--no-browser",
	}
	if os.Getuid() == 0 {
		args = append(args, "--allow-root")
	}
	cmd := exec.Command(Python, args...)
	// The token comes from the environment, as in the operator's pods, so
	// it never shows in the process list.
	cmd.Env = append(os.Environ(), "JUPYTER_TOKEN="+s.Token, "HOME="+s.dir, "JUPYTER_RUNTIME_DIR="+filepath.Join(s.dir, "runtime"))
	cmd.Dir = s.dir
	return cmd
}

// Dir is the server's root folder, which is also its kernels' working
// folder.
func (s *Server) Dir() string { return s.dir }

// Log returns the server's output so far.
func (s *Server) Log() string { return s.process.Log() }

// Stop terminates the server and its kernels (its process group).
func (s *Server) Stop() {
	_ = s.process.Stop()
	_ = os.RemoveAll(s.dir)
}

// Get reads a REST path relative to BaseURL into out, as the user would
// (tracked as activity unless the path says no_track_activity=1).
func (s *Server) Get(ctx context.Context, path string, out any) error {
	return s.do(ctx, http.MethodGet, path, nil, out)
}

func (s *Server) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.BaseURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// StartKernel starts a Python kernel and returns its id.
func (s *Server) StartKernel(ctx context.Context) (string, error) {
	var k struct {
		ID string `json:"id"`
	}
	if err := s.do(ctx, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}, &k); err != nil {
		return "", err
	}
	return k.ID, nil
}

// StartTerminal starts a terminal and returns its name. It fails on a
// server without terminado.
func (s *Server) StartTerminal(ctx context.Context) (string, error) {
	var term struct {
		Name string `json:"name"`
	}
	if err := s.do(ctx, http.MethodPost, "api/terminals", nil, &term); err != nil {
		return "", err
	}
	return term.Name, nil
}

func (s *Server) dial(ctx context.Context, path string) (*websocket.Conn, error) {
	u := "ws" + strings.TrimPrefix(s.BaseURL, "http") + path
	h := http.Header{"Authorization": {"token " + s.Token}}
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, u, h)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	return conn, err
}

// awaitNudge returns once the kernel has answered the requests the server
// sends when a websocket connects (its "nudge", on the shell and control
// channels). Each answer comes with a busy and an idle status, and the
// server takes the kernel's execution_state from the latest status of any
// request: an idle from the nudge published after a cell's busy makes a
// running cell look idle. A kernel_info_request of our own on the control
// channel is answered after the nudge's, so once its reply is here, every
// status the nudge causes has been published.
func awaitNudge(ctx context.Context, conn *websocket.Conn, session string) error {
	msgID, err := sendRequest(conn, session, "control", "kernel_info_request", map[string]any{})
	if err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(deadline)
	}
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	for {
		var m struct {
			Header       map[string]any `json:"header"`
			ParentHeader map[string]any `json:"parent_header"`
		}
		if err := conn.ReadJSON(&m); err != nil {
			return fmt.Errorf("waiting for the kernel_info_reply on the control channel: %w", err)
		}
		if m.ParentHeader["msg_id"] == msgID && m.Header["msg_type"] == "kernel_info_reply" {
			return nil
		}
	}
}

// sendRequest writes a Jupyter messaging request on a kernel channel of the
// websocket and returns its msg_id, which the replies carry as parent.
func sendRequest(conn *websocket.Conn, session, channel, msgType string, content map[string]any) (string, error) {
	msgID := randomHex(8)
	return msgID, conn.WriteJSON(map[string]any{
		"header": map[string]any{
			"msg_id": msgID, "username": "test", "session": session,
			"msg_type": msgType, "version": "5.3",
		},
		"parent_header": map[string]any{},
		"metadata":      map[string]any{},
		"content":       content,
		"channel":       channel,
		"buffers":       []any{},
	})
}

// Execution is code running in a kernel, started by Execute.
type Execution struct {
	conn *websocket.Conn
	done chan error
}

// Execute sends code to the kernel over its websocket, as a browser does,
// and returns once the kernel reports it is busy with it. Wait for the
// reply with Wait.
func (s *Server) Execute(ctx context.Context, kernelID, code string) (*Execution, error) {
	session := randomHex(8)
	conn, err := s.dial(ctx, "api/kernels/"+kernelID+"/channels?session_id="+session)
	if err != nil {
		return nil, err
	}
	if err := awaitNudge(ctx, conn, session); err != nil {
		_ = conn.Close()
		return nil, err
	}
	msgID, err := sendRequest(conn, session, "shell", "execute_request", map[string]any{
		"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true,
	})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	busy := make(chan struct{})
	e := &Execution{conn: conn, done: make(chan error, 1)}
	go e.follow(msgID, busy)
	select {
	case <-busy:
		return e, nil
	case err := <-e.done:
		_ = conn.Close()
		if err == nil {
			return e, nil
		}
		return nil, err
	case <-ctx.Done():
		_ = conn.Close()
		return nil, ctx.Err()
	}
}

// follow reads the kernel's messages about request msgID: it closes busy
// once the kernel works on it and reports the reply on e.done.
func (e *Execution) follow(msgID string, busy chan struct{}) {
	var once sync.Once
	for {
		var m struct {
			Channel      string         `json:"channel"`
			Header       map[string]any `json:"header"`
			ParentHeader map[string]any `json:"parent_header"`
			Content      map[string]any `json:"content"`
		}
		if err := e.conn.ReadJSON(&m); err != nil {
			e.done <- err
			return
		}
		if m.ParentHeader["msg_id"] != msgID {
			continue
		}
		if m.Header["msg_type"] == "status" && m.Content["execution_state"] == "busy" {
			once.Do(func() { close(busy) })
		}
		if m.Header["msg_type"] == "execute_reply" {
			once.Do(func() { close(busy) })
			if m.Content["status"] != "ok" {
				e.done <- fmt.Errorf("execution failed: %v", m.Content)
			} else {
				e.done <- nil
			}
			return
		}
	}
}

// Wait waits for the execution's reply and closes its connection.
func (e *Execution) Wait(ctx context.Context) error {
	defer func() { _ = e.conn.Close() }()
	select {
	case err := <-e.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TypeInTerminal sends a line to a terminal, as a user typing, and waits
// for the echo.
func (s *Server) TypeInTerminal(ctx context.Context, name, line string) error {
	conn, err := s.dial(ctx, "terminals/websocket/"+name)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.WriteJSON([]string{"stdin", line + "\r"}); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(deadline)
	}
	for {
		var m []any
		if err := conn.ReadJSON(&m); err != nil {
			return err
		}
		if len(m) == 2 && m[0] == "stdout" {
			if out, _ := m[1].(string); strings.Contains(out, line) {
				return nil
			}
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
