package notebook

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// TestNotebookWaitClosesItsWatchWhenItReturns: `notebook wait` without
// --timeout closes the watch it opened once the Notebook is Ready, though
// the context it was given goes on (as it does into `notebook open` after
// `create --open`).
func TestNotebookWaitClosesItsWatchWhenItReturns(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	clitest.CreateAll(t, clitest.Notebook(ns, "nb"))
	var watches clitest.Watches
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.EventuallyTimeout)
	defer cancel()
	opErr := make(chan error, 1)
	go func() {
		// The operator sets Ready once the CLI watches the Notebook.
		for watches.Opened() == 0 {
			select {
			case <-ctx.Done():
				opErr <- ctx.Err()
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		opErr <- setNotebookCondition(ctx, c, ns, "nb", notebooksv1alpha1.PhaseRunning,
			metav1.Condition{Type: commonv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "Jupyter answers"})
	}()
	r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) {
		watches.Count(o)
		o.PollInterval = time.Hour
	}, "notebook", "wait", "nb")
	if err := <-opErr; err != nil {
		t.Fatal(err)
	}
	if r.Code != util.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	testenv.Eventually(t, "the wait's watch to be closed", func(context.Context) (bool, error) {
		return watches.Open() == 0, nil
	})
}

// TestNotebookClusterTextIsEscaped: the error that ends a wait on a
// stalled Notebook quotes its condition with the control characters
// escaped and the lines kept; describe shows the condition on one line.
func TestNotebookClusterTextIsEscaped(t *testing.T) {
	ns := clitest.NewNamespace(t)
	clitest.CreateAll(t, clitest.Notebook(ns, "nb"))
	if err := setNotebookCondition(context.Background(), clitest.AdminClient(t), ns, "nb", notebooksv1alpha1.PhaseFailed,
		metav1.Condition{Type: commonv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "ImagePullFailed", Message: clitest.Hostile}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		stderr   bool
		want     string
	}{
		"wait":     {args: []string{"notebook", "wait", "nb"}, wantCode: util.ExitFailed, stderr: true, want: `error: the Notebook "nb" is stalled: ImagePullFailed: ` + clitest.HostileText + "\n"},
		"describe": {args: []string{"notebook", "describe", "nb"}, want: "ImagePullFailed  400d  " + clitest.HostileLine + "\n"},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, tc.args...)
			out := r.Out
			if tc.stderr {
				out = r.Err
			}
			if r.Code != tc.wantCode || !strings.Contains(out, tc.want) || len(clitest.TerminalControls(out)) > 0 {
				t.Errorf("exit %d, want %d; output %q, want %q escaped", r.Code, tc.wantCode, out, tc.want)
			}
		})
	}
}
