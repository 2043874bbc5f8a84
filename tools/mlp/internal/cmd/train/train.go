// Package train is `mlp train`: submit, follow, list, describe, suspend,
// resume, wait for and read the logs of TrainingJobs.
package train

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/resource"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
)

// Field paths that other work on the TrainingJob API may rename or add; each
// is used from here only, so such a change is a one-line update.
var (
	fieldSuspend = []string{"spec", "suspend"}
	fieldBackend = []string{"spec", "backend"}
)

// NewCommand is the train command group.
func NewCommand(o *util.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "train",
		Aliases: []string{"trainingjob", "tj"},
		RunE:    util.GroupRun,
		Short:   "Submit and follow TrainingJobs (training.mlplatform.dev)",
	}
	cmd.AddCommand(
		newSubmitCommand(o),
		resource.NewListCommand(o, kube.TrainingJobKind),
		resource.NewGetCommand(o, kube.TrainingJobKind),
		newDescribeTrainCommand(o),
		resource.NewDeleteCommand(o, kube.TrainingJobKind, " and their pods"),
		newSuspendCommand(o, true),
		newSuspendCommand(o, false),
		newTrainWaitCommand(o),
		newLogsCommand(o),
	)
	return cmd
}

// phaseText is the job's phase, with its place in the queue while it
// waits in one: "Queued (position 2 in team-queue)".
func phaseText(tj *trainingv1alpha1.TrainingJob) string {
	if q := tj.Status.Queue; q != nil {
		return output.PhaseInQueue(string(tj.Status.Phase), q.LocalQueue, q.Position)
	}
	return output.OrDash(string(tj.Status.Phase))
}

// suspendOptions suspends (suspend) or resumes TrainingJobs.
type suspendOptions struct {
	*util.Options
	util.NoFlagChecks
	suspend bool
	names   []string
}

func newSuspendCommand(o *util.Options, suspend bool) *cobra.Command {
	use, short := "suspend", "Suspend TrainingJobs: their pods are deleted until they are resumed"
	if !suspend {
		use, short = "resume", "Resume suspended TrainingJobs"
	}
	return &cobra.Command{
		Use:               use + " NAME...",
		Short:             short,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: util.CompleteNames(o, kube.TrainingJobKind),
		RunE:              util.RunE(&suspendOptions{Options: o, suspend: suspend}),
	}
}

// Complete takes the NAMEs.
func (so *suspendOptions) Complete(_ *cobra.Command, args []string) error {
	so.names = args
	return nil
}

// Run patches spec.suspend of each job.
func (so *suspendOptions) Run(ctx context.Context) error {
	s, err := so.Session(ctx)
	if err != nil {
		return err
	}
	patch, err := kube.MergePatchAt(fieldSuspend, so.suspend)
	if err != nil {
		return err
	}
	done := map[bool]string{true: "suspended", false: "resumed"}[so.suspend]
	for _, name := range so.names {
		if _, err := s.MergePatch(ctx, kube.TrainingJobKind, name, patch); err != nil {
			return err
		}
		fmt.Fprintf(so.Streams.Out, "trainingjob.training.mlplatform.dev %q %s\n", name, done)
	}
	return nil
}
