package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ml-platform/ml-platform/e2e/notebooks"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

var openURL = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\S*\?token=\S+`)

// TestNotebookOpenReachesJupyter: `mlp notebook open` port-forwards and
// prints a URL with the token; a real HTTP request to Jupyter's API behind
// it answers 200 with the token and 403 with a wrong one.
func TestNotebookOpenReachesJupyter(t *testing.T) {
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-cli-notebook")
	nb := notebooks.NewNotebook(t, ns, "open", false)
	notebooks.CreateReady(t, e, nb)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, mlpBin, "-n", ns, "notebook", "open", "open")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	found := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if m := openURL.FindString(s.Text()); m != "" {
				found <- m
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var raw string
	select {
	case raw = <-found:
	case <-time.After(3 * time.Minute):
		t.Fatal("mlp notebook open printed no URL within 3 minutes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	token := u.Query().Get("token")
	if token == "" {
		t.Fatal("the URL mlp notebook open printed has no token")
	}
	api := u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/") + "/api/status"
	if code, body := get(t, api, token); code != http.StatusOK || !strings.Contains(body, "last_activity") {
		t.Errorf("GET %s with the token: %d %q, want 200 and Jupyter's status", api, code, body)
	}
	if code, _ := get(t, api, "not-the-token"); code != http.StatusForbidden {
		t.Errorf("GET %s with a wrong token: %d, want 403", api, code)
	}
	// The browser's way: the token in the URL itself.
	if code, _ := get(t, raw, ""); code != http.StatusOK {
		t.Errorf("GET of the printed URL: %d, want 200", code)
	}
}

func get(t *testing.T, target, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET through mlp notebook open's forward: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	return res.StatusCode, string(b)
}
