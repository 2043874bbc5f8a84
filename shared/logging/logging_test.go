package logging_test

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ml-platform/ml-platform/shared/logging"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// syncBuffer is a log destination safe for client-go's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// zapOptions parses a level flag as the operators' main does.
func zapOptions(t *testing.T, level string, out *syncBuffer) []zap.Opts {
	t.Helper()
	opts := zap.Options{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	opts.BindFlags(fs)
	if err := fs.Parse([]string{"--zap-log-level=" + level}); err != nil {
		t.Fatal(err)
	}
	return []zap.Opts{zap.UseFlagOptions(&opts), zap.WriteTo(out)}
}

// readSecretWith writes and reads a Secret holding a fresh password with
// logger in the requests' context, as a reconciler's client calls carry
// the controller's logger, and returns the password.
func readSecretWith(t *testing.T, logger logr.Logger, contentType string) string {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.ContentType = contentType
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := logr.NewContext(t.Context(), logger)
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "logging-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	password := "pw-" + rand.String(24)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credentials", Namespace: ns.Name}, Data: map[string][]byte{"password": []byte(password)}}
	if _, err := cs.CoreV1().Secrets(ns.Name).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns.Name).Get(ctx, secret.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	return password
}

func leaks(password, logs string) []testenv.Leak {
	creds := &testenv.Credentials{}
	creds.Add(password, "the test Secret")
	return creds.Scan(logs)
}

func TestClientGoNeverLogsBodiesWhateverTheLevel(t *testing.T) {
	for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		for _, level := range []string{"5", "8", "10", "127"} {
			t.Run(fmt.Sprintf("%s at level %s", contentType, level), func(t *testing.T) {
				var out syncBuffer
				logger := logging.New(zapOptions(t, level, &out)...)
				password := readSecretWith(t, logger, contentType)
				if found := leaks(password, out.String()); len(found) > 0 {
					t.Errorf("logs at --zap-log-level=%s contain %v:\n%s", level, found, out.String())
				}
				// The cap must not silence what is below it.
				logger.V(logging.MaxLevel).Info("marker at the highest level")
				logger.V(logging.MaxLevel + 1).Info("marker above the cap")
				logger.V(2).V(logging.MaxLevel).Info("nested marker above the cap")
				if got := out.String(); !strings.Contains(got, "marker at the highest level") || strings.Contains(got, "above the cap") {
					t.Errorf("V(%d) logged = %v, above it = %v, want true and false", logging.MaxLevel,
						strings.Contains(got, "marker at the highest level"), strings.Contains(got, "above the cap"))
				}
			})
		}
	}
}

// TestUncappedLoggerLeaks shows what the cap prevents, and that the scan
// recognises client-go's dumps: the same requests with zap's own logger
// at level 10 put the password into the logs, as base64 of a JSON body or
// inside the hex dump of a protobuf one.
func TestUncappedLoggerLeaks(t *testing.T) {
	for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(contentType, func(t *testing.T) {
			var out syncBuffer
			password := readSecretWith(t, zap.New(zapOptions(t, "10", &out)...), contentType)
			found := leaks(password, out.String())
			if len(found) == 0 {
				t.Fatalf("an uncapped logger at level 10 logged no credential; the test proves nothing:\n%s", out.String())
			}
			t.Logf("uncapped level 10 leaked: %v", found)
		})
	}
}

// TestKlogGlobalLoggerIsBounded covers client-go code that logs through
// klog's global logger (a request without a logger in its context). The
// operators' main sets it with SetGlobal, as testenv's CaptureLogs did for
// this binary before anything logged (klog's logger must not change while
// it is in use), at a level above the cap into testenv.Logs. klog checks its
// own verbosity (its -v flag, which the operators never set) before it
// calls our logger, and our cap holds behind it.
func TestKlogGlobalLoggerIsBounded(t *testing.T) {
	password := readSecretWith(t, klog.Background(), "application/vnd.kubernetes.protobuf")
	marker := "marker through klog " + rand.String(8)
	klog.Background().Info(marker)
	logs := testenv.Logs.String()
	if found := leaks(password, logs); len(found) > 0 {
		t.Errorf("klog's global logger logged %v", found)
	}
	if !strings.Contains(logs, marker) {
		t.Error("klog's global logger does not write to the capped logger")
	}
}

// TestChildLoggersStayCapped runs the leak check through the loggers that
// reconcilers really log and call the API server with: children made with
// WithName, WithValues and V, in every order. A child that lost the cap
// would dump the Secret's body at the level asked for.
func TestChildLoggersStayCapped(t *testing.T) {
	children := map[string]func(logr.Logger) logr.Logger{
		"WithName":   func(l logr.Logger) logr.Logger { return l.WithName("controller") },
		"WithValues": func(l logr.Logger) logr.Logger { return l.WithValues("reconcileID", "abc") },
		"V(1)":       func(l logr.Logger) logr.Logger { return l.V(1) },
		"WithName.WithValues.V(2)": func(l logr.Logger) logr.Logger {
			return l.WithName("controller").WithValues("namespace", "ns", "name", "n").V(2)
		},
		"V(1).WithValues.WithName": func(l logr.Logger) logr.Logger {
			return l.V(1).WithValues("reconcileID", "abc").WithName("phase")
		},
	}
	for name, child := range children {
		for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
			t.Run(name+" "+contentType, func(t *testing.T) {
				var out syncBuffer
				logger := child(logging.New(zapOptions(t, "10", &out)...))
				password := readSecretWith(t, logger, contentType)
				if found := leaks(password, out.String()); len(found) > 0 {
					t.Errorf("logs through %s contain %v:\n%s", name, found, out.String())
				}
				logger.V(logging.MaxLevel + 1).Info("marker above the cap")
				if strings.Contains(out.String(), "marker above the cap") {
					t.Errorf("%s logged above the cap", name)
				}
			})
		}
	}
}

// TestKlogVerbosityCannotLiftTheCap raises klog's own -v flag to 10, as an
// operator that bound klog's flags could, and makes requests whose context
// carries no logger (client-go then logs through klog's global logger), one
// with a bearer token: neither the token nor a Secret's body may reach the
// logs. With -v at 6 or more client-go installs its debugging round tripper
// (headers, curl commands), and with -v at 8 it dumps bodies; klog then
// writes them through the logger SetGlobal gave it, at their V-level, so
// the cap drops them.
func TestKlogVerbosityCannotLiftTheCap(t *testing.T) {
	setKlogVerbosity(t, "10")
	if !klog.V(10).Enabled() {
		t.Fatal("klog's verbosity was not raised; the test proves nothing")
	}
	token := "token-" + rand.String(32)
	anonymous := rest.AnonymousClientConfig(env.Config)
	anonymous.BearerToken = token
	cs, err := kubernetes.NewForConfig(anonymous)
	if err != nil {
		t.Fatal(err)
	}
	// The token is refused (401); what matters is what was logged.
	_, _ = cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	password := readSecretWith(t, klog.Background(), "application/json")

	creds := &testenv.Credentials{}
	creds.Add(password, "the test Secret")
	creds.Add(token, "the bearer token")
	if found := creds.Scan(testenv.Logs.String()); len(found) > 0 {
		t.Errorf("with klog's -v at 10, the logs contain %v", found)
	}
}

// setKlogVerbosity sets klog's -v flag for the test and restores it after.
func setKlogVerbosity(t *testing.T, level string) {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	v := fs.Lookup("v")
	old := v.Value.String()
	if err := v.Value.Set(level); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := v.Value.Set(old); err != nil {
			t.Error(err)
		}
	})
}
