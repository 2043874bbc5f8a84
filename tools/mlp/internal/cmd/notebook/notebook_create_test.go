package notebook

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// TestNotebookCreateFlagsAndDryRun: --env, --idle-timeout and --queue reach
// the spec; --dry-run=client prints without sending, --dry-run=server
// is validated by the API server, -f reads a file; none creates anything.
func TestNotebookCreateFlagsAndDryRun(t *testing.T) {
	ns := clitest.NewNamespace(t)
	r := clitest.Run(t, ns, "notebook", "create", "alice", "--env", "HF_HOME=/data/hf", "-e", "A=b=c", "--idle-timeout", "2h",
		"--queue", "team-a", "--dry-run", "-o", "yaml")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	var nb notebooksv1alpha1.Notebook
	if err := yaml.Unmarshal([]byte(r.Out), &nb); err != nil {
		t.Fatal(err)
	}
	wantEnv := []corev1.EnvVar{{Name: "HF_HOME", Value: "/data/hf"}, {Name: "A", Value: "b=c"}}
	if nb.Spec.QueueName != "team-a" || nb.Spec.Culling.IdleTimeout == nil || nb.Spec.Culling.IdleTimeout.Duration != 2*time.Hour ||
		len(nb.Spec.Env) != 2 || nb.Spec.Env[0] != wantEnv[0] || nb.Spec.Env[1] != wantEnv[1] {
		t.Errorf("dry run spec %+v does not carry the flags", nb.Spec)
	}

	file := filepath.Join(t.TempDir(), "nb.yaml")
	manifest := "apiVersion: notebooks.mlplatform.dev/v1alpha1\nkind: Notebook\nmetadata:\n  name: from-file\nspec:\n  queueName: team-b\n"
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	r = clitest.Run(t, ns, "notebook", "create", "-f", file, "--dry-run=server", "-o", "jsonpath={.metadata.namespace}/{.metadata.name} {.spec.queueName}")
	if r.Code != 0 || r.Out != ns+"/from-file team-b" {
		t.Errorf("-f --dry-run=server: exit %d, out %q, stderr %q", r.Code, r.Out, r.Err)
	}
	for args, wantErr := range map[string]string{
		"-f " + file + " --queue x": "-f cannot be combined with --queue",
		"x --env NOEQUALS":          `--env "NOEQUALS": expected NAME=VALUE`,
		"x --idle-timeout -1m":      "--idle-timeout must not be negative",
		"x --dry-run --wait":        "--dry-run creates nothing to wait for or open",
		"":                          "a NAME is needed",
	} {
		r := clitest.Run(t, ns, append([]string{"notebook", "create"}, strings.Fields(args)...)...)
		if r.Code != util.ExitFailed || !strings.Contains(r.Err, wantErr) {
			t.Errorf("%q: exit %d, stderr %q, want %q", args, r.Code, r.Err, wantErr)
		}
	}
	var list notebooksv1alpha1.NotebookList
	if err := clitest.AdminClient(t).List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("dry runs and refusals left %d Notebooks (err %v)", len(list.Items), err)
	}
}

// setNotebookCondition acts out the Notebook operator.
func setNotebookCondition(ctx context.Context, c client.Client, ns, name string, phase notebooksv1alpha1.Phase, cond metav1.Condition) error {
	var nb notebooksv1alpha1.Notebook
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &nb); err != nil {
		return err
	}
	nb.Status.Phase = phase
	cond.ObservedGeneration = nb.Generation
	meta.SetStatusCondition(&nb.Status.Conditions, cond)
	return c.Status().Update(ctx, &nb)
}

// TestNotebookCreateWaitDescribe creates with --wait, which returns once
// the operator sets Ready (seen through a watch: polling is an hour
// apart), then describes the Notebook; wait exits 1 on Stalled and 2 on
// its timeout.
func TestNotebookCreateWaitDescribe(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	stderr := &clitest.SyncBuffer{}
	opErr := make(chan error, 1)
	cliDone := make(chan struct{})
	go func() {
		// The operator sets Ready once the CLI shows it is waiting, and
		// gives up when the CLI ended first.
		for !strings.Contains(stderr.String(), "nb: -") {
			select {
			case <-cliDone:
				opErr <- nil
				return
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
		o.PollInterval = time.Hour
		o.Streams.ErrOut = stderr
	}, "notebook", "create", "nb", "--idle-timeout", "90m", "--wait")
	close(cliDone)
	if err := <-opErr; err != nil {
		t.Fatal(err)
	}
	if r.Code != 0 || r.Out != "notebook.notebooks.mlplatform.dev/nb created\n" ||
		!strings.Contains(stderr.String(), "nb: Running\nNotebook \"nb\" is ready; open it with `mlp notebook open nb`\n") {
		t.Errorf("create --wait: exit %d, out %q, stderr %q", r.Code, r.Out, stderr.String())
	}

	r = clitest.Run(t, ns, "notebook", "describe", "nb")
	for _, want := range []string{"Name:", "nb", "Status:", "Running", "Idle timeout:", "1h30m0s", "Conditions:", "Ready", "Jupyter answers", "Events:"} {
		if r.Code != 0 || !strings.Contains(r.Out, want) {
			t.Errorf("describe: exit %d, lacks %q:\n%s%s", r.Code, want, r.Out, r.Err)
		}
	}

	if err := setNotebookCondition(ctx, c, ns, "nb", notebooksv1alpha1.PhaseFailed,
		metav1.Condition{Type: commonv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "ImagePullFailed", Message: "no such image"}); err != nil {
		t.Fatal(err)
	}
	if err := setNotebookCondition(ctx, c, ns, "nb", notebooksv1alpha1.PhaseFailed,
		metav1.Condition{Type: commonv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Stalled", Message: "stalled"}); err != nil {
		t.Fatal(err)
	}
	r = clitest.Run(t, ns, "notebook", "wait", "nb")
	if r.Code != util.ExitFailed || !strings.Contains(r.Err, `error: the Notebook "nb" is stalled: ImagePullFailed: no such image`) {
		t.Errorf("wait on a stalled notebook: exit %d, stderr %q", r.Code, r.Err)
	}
	clitest.CreateAll(t, clitest.Notebook(ns, "slow"))
	r = clitest.Run(t, ns, "notebook", "wait", "slow", "--timeout", "1s")
	if r.Code != util.ExitIncomplete || !strings.Contains(r.Err, `timed out after 1s waiting for Notebook "slow" to be Ready`) {
		t.Errorf("wait timeout: exit %d, stderr %q", r.Code, r.Err)
	}
}
