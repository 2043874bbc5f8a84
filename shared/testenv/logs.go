package testenv

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogsEnv, set to any value, streams the operators' logs to stderr while
// tests run, besides capturing them.
const LogsEnv = "MLP_TEST_LOGS"

// failedLogLines is how much of the captured logs a failed test binary
// prints: enough to show the reconciles around a failure.
const failedLogLines = 300

// Logs holds every line the controllers under test log, at debug level,
// for tests that inspect them (a secret scan, say) and for the report
// of a failed run.
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

// tail returns the last n lines.
func (b *LogBuffer) tail(n int) string {
	lines := strings.SplitAfter(b.String(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// CaptureLogs makes controller-runtime log into Logs (and to stderr as
// well when MLP_TEST_LOGS is set). Main calls it; a TestMain that starts
// its control plane with Start calls it first.
func CaptureLogs() {
	var out io.Writer = Logs
	if os.Getenv(LogsEnv) != "" {
		out = io.MultiWriter(Logs, os.Stderr)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(out), zap.UseDevMode(true)))
}

// ReportLogs prints the end of the captured logs when the tests failed
// (code is m.Run's), unless they were streamed already.
func ReportLogs(code int) {
	if code == 0 || os.Getenv(LogsEnv) != "" || Logs.String() == "" {
		return
	}
	fmt.Fprintf(os.Stderr, "\n== the last %d lines the operators logged (%s=1 streams them all)\n%s", failedLogLines, LogsEnv, Logs.tail(failedLogLines))
}
