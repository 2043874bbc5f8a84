package util

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gwebsocket "github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	spdystream "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	pfconstants "k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// echoPortForwarder plays the apiserver's portforward subresource: it answers
// a WebSocket upgrade (SPDY tunnelled inside, as apiservers from 1.30 do) only
// when websockets is true, always answers a SPDY upgrade, and echoes what
// reaches the pod's port. It records each upgrade it was asked for, in order.
type echoPortForwarder struct {
	websockets bool
	mu         sync.Mutex
	upgrades   []string
}

func (f *echoPortForwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.upgrades = append(f.upgrades, r.Method+" "+r.Header.Get("Upgrade"))
	f.mu.Unlock()
	var conn httpstream.Connection
	if gwebsocket.IsWebSocketUpgrade(r) {
		if !f.websockets {
			http.Error(w, "this apiserver does not tunnel port-forward over websockets", http.StatusBadRequest)
			return
		}
		upgrader := gwebsocket.Upgrader{Subprotocols: []string{pfconstants.WebsocketsSPDYTunnelingPortForwardV1}}
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		if conn, err = spdystream.NewServerConnection(portforward.NewTunnelingConnection("server", ws), echoStreams); err != nil {
			return
		}
	} else {
		if _, err := httpstream.Handshake(r, w, []string{pfconstants.PortForwardV1Name}); err != nil {
			return
		}
		if conn = spdystream.NewResponseUpgrader().UpgradeResponse(w, r, echoStreams); conn == nil {
			return
		}
	}
	<-conn.CloseChan()
}

func (f *echoPortForwarder) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.upgrades...)
}

// echoStreams serves kubelet's side of one forwarded connection: the error
// stream closes at once (no error), the data stream echoes.
func echoStreams(stream httpstream.Stream, replySent <-chan struct{}) error {
	go func() {
		<-replySent
		defer func() { _ = stream.Close() }()
		if stream.Headers().Get(corev1.StreamType) == corev1.StreamTypeData {
			_, _ = io.Copy(stream, stream)
		}
	}()
	return nil
}

func TestPortForwardTriesWebSocketFirstAndFallsBackToSPDY(t *testing.T) {
	for name, tc := range map[string]struct {
		websockets   bool
		env          string
		wantUpgrades []string
	}{
		"websocket accepted": {
			websockets:   true,
			wantUpgrades: []string{"GET websocket"},
		},
		"websocket refused, SPDY accepted": {
			wantUpgrades: []string{"GET websocket", "POST SPDY/3.1"},
		},
		"websockets turned off as for kubectl": {
			websockets:   true,
			env:          "false",
			wantUpgrades: []string{"POST SPDY/3.1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(portForwardWebsocketsEnv, tc.env)
			server := &echoPortForwarder{websockets: tc.websockets}
			srv := httptest.NewServer(server)
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL}
			s := &kube.Session{Cfg: cfg, CS: kubernetes.NewForConfigOrDie(cfg)}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nb-0", Namespace: "team"}}

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ready, done := make(chan int, 1), make(chan error, 1)
			go func() { done <- PortForward(ctx, s, pod, 0, 8888, ready) }()
			var port int
			select {
			case port = <-ready:
			case err := <-done:
				t.Fatalf("the forward ended before it was ready: %v", err)
			}
			if got := echoThrough(t, port, "ping"); got != "ping" {
				t.Errorf("through the forward: got %q, want the echo %q", got, "ping")
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the forward ended with %v after it was cancelled", err)
			}
			if diff := cmp.Diff(tc.wantUpgrades, server.asked()); diff != "" {
				t.Errorf("upgrades asked of the apiserver (-want +got):\n%s", diff)
			}
		})
	}
}

// echoThrough writes msg to the forwarded local port and reads as many bytes back.
func echoThrough(t *testing.T, port int, msg string) string {
	t.Helper()
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	return string(got)
}
