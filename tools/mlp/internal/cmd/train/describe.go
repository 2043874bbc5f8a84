package train

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/describe"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/follow"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
)

type describeOptions struct {
	*util.Options
	util.OneName
	util.NoFlagChecks
}

func newDescribeTrainCommand(o *util.Options) *cobra.Command {
	return &cobra.Command{
		Use:               "describe NAME",
		Short:             "Show a TrainingJob in detail: conditions, runs, failure, progress, pods and events",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNames(o, kube.TrainingJobKind),
		RunE:              util.RunE(&describeOptions{Options: o}),
	}
}

// Run prints the TrainingJob, its pods and events.
func (do *describeOptions) Run(ctx context.Context) error {
	s, err := do.Session(ctx)
	if err != nil {
		return err
	}
	name := do.Name
	u, err := s.Get(ctx, kube.TrainingJobKind, name)
	if err != nil {
		return err
	}
	tj, err := kube.Typed[trainingv1alpha1.TrainingJob](u)
	if err != nil {
		return err
	}
	now := do.Now()
	w := tabwriter.NewWriter(do.Streams.Out, 0, 8, 2, ' ', 0)
	// Every value holds the cluster's text, escaped.
	field := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, escape.Line(v)) }
	field("Name", tj.Name)
	field("Namespace", tj.Namespace)
	field("Framework", string(tj.Spec.Framework))
	field("Image", tj.Spec.Image)
	field("Workers", fmt.Sprint(tj.Spec.Workers))
	field("Status", phaseText(tj))
	field("Run", fmt.Sprint(tj.Status.Run))
	field("Restarts", fmt.Sprint(tj.Status.RestartCount))
	field("Age", output.Age(tj.CreationTimestamp.Time, now))
	field("Duration", output.OrDash(tj.Status.Duration))
	if c := follow.WaitingCondition(tj); c != nil {
		field("Waiting on", follow.ConditionText(c))
	}
	if follow.Pending(tj) {
		if e := follow.LatestWarning(ctx, s, tj); e != nil {
			field("Last warning", fmt.Sprintf("%s (%s ago): %s", e.Reason, output.Age(kube.EventTime(e), now), strings.TrimSpace(e.Message)))
		}
	}
	if p := follow.ReadProgress(u); p.Reported() {
		field("Progress", p.Summary(now))
		field("Last report", output.Age(p.LastReport, now)+" ago")
	}
	if f := tj.Status.Failure; f != nil {
		field("Failure", cmp.Or(f.Cause, f.Reason)+" ("+string(f.Class)+")")
		field("Failure message", output.OrDash(f.Message))
		if f.Pod != "" {
			field("Failed pod", fmt.Sprintf("%s container %s exit code %d", f.Pod, f.Container, f.ExitCode))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	describe.Conditions(do.Streams.Out, tj.Status.Conditions, now)
	describeRuns(do.Streams.Out, tj.Status.Runs)
	if tj.Status.Run > 0 {
		pods, err := follow.RunPods(ctx, s, name, tj.Status.Run)
		if err != nil && !apierrors.IsForbidden(err) {
			return err
		}
		describePods(do.Streams.Out, rankedPods(pods), err)
	}
	return describe.Events(ctx, do.Streams.Out, s, "TrainingJob", tj, now)
}

func describeRuns(out io.Writer, runs []trainingv1alpha1.RunRecord) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintln(out, "Ended runs:")
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  RUN\tREASON\tCLASS\tMESSAGE")
	for _, r := range runs {
		fmt.Fprintf(w, "  %d\t%s\t%s\t%s\n", r.Run, escape.Line(r.Reason), escape.Line(output.OrDash(string(r.Class))), escape.Line(r.Message))
	}
	_ = w.Flush()
}

// describePods lists the run's pods by rank. A user who may read the job
// but not its pods (forbidden) gets the rest of describe, and the reason
// in their place, as for events.
func describePods(out io.Writer, pods []corev1.Pod, forbidden error) {
	fmt.Fprintln(out, "Pods of the current run:")
	if forbidden != nil {
		fmt.Fprintf(out, "  <not shown: %s>\n", escape.Line(forbidden.Error()))
		return
	}
	if len(pods) == 0 {
		fmt.Fprintln(out, "  <none>")
		return
	}
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  RANK\tPOD\tPHASE\tREADY\tRESTARTS")
	for i := range pods {
		var restarts int32
		for _, cs := range pods[i].Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		fmt.Fprintf(w, "  %d\t%s\t%s\t%t\t%d\n", i, escape.Line(pods[i].Name), escape.Line(output.OrDash(string(pods[i].Status.Phase))), kube.PodReady(&pods[i]), restarts)
	}
	_ = w.Flush()
}
