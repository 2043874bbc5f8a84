package notebook

import (
	"cmp"
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/describe"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/watch"
)

func newNotebookDescribeCommand(o *util.Options) *cobra.Command {
	return &cobra.Command{
		Use:               "describe NAME",
		Short:             "Show a Notebook in detail: status, URL, workspace, culling, conditions and events",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNames(o, kube.NotebookKind),
		RunE:              util.RunE(&notebookDescribeOptions{Options: o}),
	}
}

type notebookDescribeOptions struct {
	*util.Options
	util.OneName
	util.NoFlagChecks
}

// Run prints the Notebook, its conditions and events.
func (do *notebookDescribeOptions) Run(ctx context.Context) error {
	s, err := do.Session(ctx)
	if err != nil {
		return err
	}
	u, err := s.Get(ctx, kube.NotebookKind, do.Name)
	if err != nil {
		return err
	}
	nb, err := kube.Typed[notebooksv1alpha1.Notebook](u)
	if err != nil {
		return err
	}
	now := do.Now()
	w := tabwriter.NewWriter(do.Streams.Out, 0, 8, 2, ' ', 0)
	// Every value holds the cluster's text, escaped.
	field := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, escape.Line(v)) }
	field("Name", nb.Name)
	field("Namespace", nb.Namespace)
	field("Status", phaseText(nb))
	field("Image", output.OrDash(cmp.Or(nb.Status.Image, nb.Spec.Image)))
	field("URL", output.OrDash(cmp.Or(nb.Status.IngressURL, nb.Status.URL)))
	field("Queue", output.OrDash(nb.Spec.QueueName))
	field("Workspace", output.OrDash(nb.Status.WorkspaceClaimName))
	field("Age", output.Age(nb.CreationTimestamp.Time, now))
	if nb.Status.LastActivity != nil {
		field("Last activity", output.Age(nb.Status.LastActivity.Time, now)+" ago")
	}
	if t := nb.Spec.Culling.IdleTimeout; t != nil {
		field("Idle timeout", t.Duration.String())
	}
	if nb.Status.CullDeadline != nil {
		field("Cull deadline", nb.Status.CullDeadline.UTC().Format(time.RFC3339))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	describe.Conditions(do.Streams.Out, nb.Status.Conditions, now)
	return describe.Events(ctx, do.Streams.Out, s, "Notebook", nb, now)
}

// phaseText is the Notebook's phase, with its place in the queue while it
// waits in one, as mlp train shows a TrainingJob's: "Queued (position 2
// in team-queue)".
func phaseText(nb *notebooksv1alpha1.Notebook) string {
	if q := nb.Status.Queue; q != nil {
		return output.PhaseInQueue(string(nb.Status.Phase), q.LocalQueue, q.Position)
	}
	return output.OrDash(string(nb.Status.Phase))
}

// waitForNotebook reads the Notebook whenever a watch of it reports a
// change until it is Ready (nil), Stalled (exit 1 with its message) or the
// wait ends first (exit 2). The phase is shown on stderr as it changes.
func waitForNotebook(ctx context.Context, o *util.Options, s *kube.Session, name string, timeout time.Duration) error {
	// The watch serves this wait only: it ends when the wait returns, not
	// when the caller's context does (create --open goes on to open).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	changed := watch.Object(ctx, s, kube.NotebookKind, name, o.PollInterval)
	last := ""
	for {
		u, err := s.Get(ctx, kube.NotebookKind, name)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err == nil {
			done, err := notebookOutcome(o, u, &last)
			if done {
				return err
			}
		}
		select {
		case <-ctx.Done():
			why := "interrupted"
			if timeout > 0 && ctx.Err() == context.DeadlineExceeded {
				why = fmt.Sprintf("timed out after %s", timeout)
			}
			return &util.ExitError{Code: util.ExitIncomplete, Err: fmt.Errorf("%s waiting for Notebook %q to be Ready", why, name)}
		case <-changed:
		}
	}
}

// notebookOutcome shows the Notebook's phase when it changed and says
// whether the wait is over.
func notebookOutcome(o *util.Options, u *unstructured.Unstructured, last *string) (bool, error) {
	nb, err := kube.Typed[notebooksv1alpha1.Notebook](u)
	if err != nil {
		return true, err
	}
	if line := nb.Name + ": " + escape.Line(output.OrDash(string(nb.Status.Phase))); line != *last {
		fmt.Fprintln(o.Streams.ErrOut, line)
		*last = line
	}
	if c := meta.FindStatusCondition(nb.Status.Conditions, commonv1alpha1.ConditionReady); c != nil && c.Status == "True" && c.ObservedGeneration >= nb.Generation {
		fmt.Fprintf(o.Streams.ErrOut, "Notebook %q is ready; open it with `mlp notebook open %s`\n", nb.Name, nb.Name)
		return true, nil
	}
	if c := meta.FindStatusCondition(nb.Status.Conditions, commonv1alpha1.ConditionStalled); c != nil && c.Status == "True" {
		return true, &util.ExitError{Code: util.ExitFailed, Err: fmt.Errorf("the Notebook %q is stalled: %s: %s", nb.Name, c.Reason, c.Message)}
	}
	return false, nil
}
