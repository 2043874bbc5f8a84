package testenv

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ml-platform/ml-platform/shared/logging"
)

// LogsEnv is the environment variable that, set to any value, streams the
// operators' logs to stderr while tests run, besides capturing them.
const LogsEnv = "MLP_TEST_LOGS"

// Logs holds every line the controllers under test log, at the highest
// level a logger allows (logging.MaxLevel), for the credential scan of
// VerifyLogs, for tests that inspect them and for the report of a failed
// run.
var Logs = &LogBuffer{}

// LogBuffer is a log sink safe for concurrent writers.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CaptureLogs makes controller-runtime and klog log into Logs (and to
// stderr as well when MLP_TEST_LOGS is set), through the same capped logger
// as the operators' main, asked for a level above the cap: the scan then
// proves that the most verbose logs an operator can write hold no
// credential. Main calls it; a TestMain that starts its control plane with
// Start calls it first.
func CaptureLogs() {
	var out io.Writer = Logs
	if os.Getenv(LogsEnv) != "" {
		out = io.MultiWriter(Logs, os.Stderr)
	}
	logging.SetGlobal(logging.New(zap.WriteTo(out), zap.UseDevMode(true), zap.Level(zapcore.Level(-10))))
}

// ReportLogs saves the captured logs to a file when the tests failed (code
// is m.Run's) and says where, in one line: printed in full they would push
// the failures themselves out of the end of the output that CI shows.
func ReportLogs(code int) {
	if code == 0 || os.Getenv(LogsEnv) != "" || Logs.String() == "" {
		return
	}
	dir := filepath.Join(os.TempDir(), "mlp-test-logs")
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.log", filepath.Base(os.Args[0]), os.Getpid()))
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = os.WriteFile(path, []byte(Logs.String()), 0o600)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "saving the operators' logs: %v (%s=1 streams them)\n", err, LogsEnv)
		return
	}
	fmt.Fprintf(os.Stderr, "the operators' logs are in %s (%s=1 streams them)\n", path, LogsEnv)
}
