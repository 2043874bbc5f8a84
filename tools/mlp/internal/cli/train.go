package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// Field paths that other work on the TrainingJob API may rename or add; each
// is used from here only, so such a change is a one-line update.
var (
	fieldSuspend  = []string{"spec", "suspend"}
	fieldBackend  = []string{"spec", "backend"}
	fieldProgress = []string{"status", "progress"}
)

func newTrainCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "train",
		Aliases: []string{"trainingjob", "tj"},
		RunE:    groupRun,
		Short:   "Submit and follow TrainingJobs (training.mlplatform.dev)",
	}
	cmd.AddCommand(
		newSubmitCommand(o),
		newListCommand(o, trainingJobKind, trainingJobTable),
		newGetCommand(o, trainingJobKind, trainingJobTable),
		newDescribeTrainCommand(o),
		newDeleteCommand(o, trainingJobKind, " and their pods"),
		newSuspendCommand(o, true),
		newSuspendCommand(o, false),
		newTrainWaitCommand(o),
		newLogsCommand(o),
	)
	return cmd
}

var trainingJobTable = table{
	headers: func(wide bool) []string {
		h := []string{"NAME", "FRAMEWORK", "WORKERS", "STATUS", "PROGRESS", "RESTARTS", "AGE", "DURATION"}
		if wide {
			h = append(h, "RUN", "QUEUE", "BACKEND", "REASON")
		}
		return h
	},
	row: func(u *unstructured.Unstructured, wide bool, now time.Time) []string {
		tj, err := typed[trainingv1alpha1.TrainingJob](u)
		if err != nil {
			return []string{u.GetName(), "<invalid>"}
		}
		p := readProgress(u)
		r := []string{
			tj.Name, string(tj.Spec.Framework), strconv.Itoa(int(tj.Spec.Workers)), phaseText(tj),
			p.percentText(), strconv.Itoa(int(tj.Status.RestartCount)), age(tj.CreationTimestamp.Time, now), orDash(tj.Status.Duration),
		}
		if wide {
			backend, _, _ := unstructured.NestedString(u.Object, fieldBackend...)
			reason := ""
			if tj.Status.Failure != nil {
				reason = firstNonEmpty(tj.Status.Failure.Cause, tj.Status.Failure.Reason)
			}
			r = append(r, strconv.Itoa(int(tj.Status.Run)), orDash(tj.Spec.QueueName), orDash(backend), orDash(reason))
		}
		return r
	},
}

// queuePlace is a queued job's place in its Kueue LocalQueue, such as
// "position 2 in team-queue", as the operator last read it from Kueue;
// empty when the job does not wait in a queue or its place is unknown.
func queuePlace(tj *trainingv1alpha1.TrainingJob) string {
	q := tj.Status.Queue
	if q == nil || q.Position == nil {
		return ""
	}
	return fmt.Sprintf("position %d in %s", *q.Position, q.LocalQueue)
}

// phaseText is the job's phase, with its place in the queue while it
// waits in one: "Queued (position 2 in team-queue)".
func phaseText(tj *trainingv1alpha1.TrainingJob) string {
	if place := queuePlace(tj); place != "" {
		return fmt.Sprintf("%s (%s)", orDash(string(tj.Status.Phase)), place)
	}
	return orDash(string(tj.Status.Phase))
}

// suspendOptions suspends (suspend) or resumes TrainingJobs.
type suspendOptions struct {
	*Options
	noFlagChecks
	suspend bool
	names   []string
}

func newSuspendCommand(o *Options, suspend bool) *cobra.Command {
	use, short := "suspend", "Suspend TrainingJobs: their pods are deleted until they are resumed"
	if !suspend {
		use, short = "resume", "Resume suspended TrainingJobs"
	}
	return &cobra.Command{
		Use:               use + " NAME...",
		Short:             short,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeNames(o, trainingJobKind),
		RunE:              runE(&suspendOptions{Options: o, suspend: suspend}),
	}
}

func (so *suspendOptions) Complete(_ *cobra.Command, args []string) error {
	so.names = args
	return nil
}

func (so *suspendOptions) Run(ctx context.Context) error {
	s, err := so.session(ctx)
	if err != nil {
		return err
	}
	patch, err := mergePatchAt(fieldSuspend, so.suspend)
	if err != nil {
		return err
	}
	done := map[bool]string{true: "suspended", false: "resumed"}[so.suspend]
	for _, name := range so.names {
		if _, err := s.mergePatch(ctx, trainingJobKind, name, patch); err != nil {
			return err
		}
		fmt.Fprintf(so.Streams.Out, "trainingjob.training.mlplatform.dev %q %s\n", name, done)
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
