package cmd

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// silentListener accepts connections on loopback and never answers, as a
// firewalled or hung apiserver does; it stops with the test.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); _ = l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				<-done
				return
			}
			conns = append(conns, c)
		}
	}()
	return l.Addr().String()
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// TestUnreachableClusterIsSaidInOneLine runs commands against a closed port
// and against a server that never answers: each exits 1 with one line
// naming the cluster and the cause, the silent one after the connect
// timeout rather than after every request's own.
func TestUnreachableClusterIsSaidInOneLine(t *testing.T) {
	for name, tc := range map[string]struct {
		addr, cause string
	}{
		"closed port":      {closedPort(t), "connection refused"},
		"server is silent": {silentListener(t), "no answer within 1s"},
	} {
		cfg := rest.CopyConfig(clitest.Env.Config)
		cfg.Host = "https://" + tc.addr
		for _, args := range [][]string{
			{"version"},
			{"train", "list"},
			{"train", "wait", "job"},
			{"train", "submit", "job", "--image", "i"},
			{"notebook", "list"},
			{"featurestore", "config", "shop", "--stdout"},
		} {
			t.Run(name+"/"+strings.Join(args, " "), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				r := clitest.CLI(ctx, t, cfg, "default", func(o *util.Options) { o.ConnectTimeout = time.Second }, args...)
				want := "error: cannot reach the cluster at " + cfg.Host + ": "
				if r.Code != util.ExitFailed || !strings.HasPrefix(r.Err, want) || !strings.Contains(r.Err, tc.cause) || strings.Count(r.Err, "\n") != 1 {
					t.Errorf("exit %d, stderr %q; want exit 1 and one line %q... %q", r.Code, r.Err, want, tc.cause)
				}
			})
		}
	}
}
