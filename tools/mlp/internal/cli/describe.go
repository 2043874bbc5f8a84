package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

type describeOptions struct {
	*Options
	oneName
	noFlagChecks
}

func newDescribeTrainCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:               "describe NAME",
		Short:             "Show a TrainingJob in detail: conditions, runs, failure, progress, pods and events",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, trainingJobKind),
		RunE:              runE(&describeOptions{Options: o}),
	}
}

func (do *describeOptions) Run(ctx context.Context) error {
	s, err := do.session(ctx)
	if err != nil {
		return err
	}
	name := do.name
	u, err := s.get(ctx, trainingJobKind, name)
	if err != nil {
		return err
	}
	tj, err := typed[trainingv1alpha1.TrainingJob](u)
	if err != nil {
		return err
	}
	now := do.Now()
	w := tabwriter.NewWriter(do.Streams.Out, 0, 8, 2, ' ', 0)
	field := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	field("Name", tj.Name)
	field("Namespace", tj.Namespace)
	field("Framework", string(tj.Spec.Framework))
	field("Image", tj.Spec.Image)
	field("Workers", fmt.Sprint(tj.Spec.Workers))
	field("Status", phaseText(tj))
	field("Run", fmt.Sprint(tj.Status.Run))
	field("Restarts", fmt.Sprint(tj.Status.RestartCount))
	field("Age", age(tj.CreationTimestamp.Time, now))
	field("Duration", orDash(tj.Status.Duration))
	if c := waitingCondition(tj); c != nil {
		field("Waiting on", conditionText(c))
	}
	if pending(tj) {
		if e := latestWarning(ctx, s, tj); e != nil {
			field("Last warning", fmt.Sprintf("%s (%s ago): %s", e.Reason, age(eventTime(e), now), strings.TrimSpace(e.Message)))
		}
	}
	if p := readProgress(u); p.reported() {
		field("Progress", p.summary(now))
		field("Last report", age(p.LastReport, now)+" ago")
	}
	if f := tj.Status.Failure; f != nil {
		field("Failure", firstNonEmpty(f.Cause, f.Reason)+" ("+string(f.Class)+")")
		field("Failure message", orDash(f.Message))
		if f.Pod != "" {
			field("Failed pod", fmt.Sprintf("%s container %s exit code %d", f.Pod, f.Container, f.ExitCode))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	describeConditions(do.Streams.Out, tj.Status.Conditions, now)
	describeRuns(do.Streams.Out, tj.Status.Runs)
	if tj.Status.Run > 0 {
		pods, err := runPods(ctx, s, name, tj.Status.Run)
		if err != nil {
			return err
		}
		describePods(do.Streams.Out, rankedPods(pods))
	}
	return do.describeEvents(ctx, s, "TrainingJob", name, now)
}

func describeConditions(out io.Writer, conds []metav1.Condition, now time.Time) {
	fmt.Fprintln(out, "Conditions:")
	if len(conds) == 0 {
		fmt.Fprintln(out, "  <none>")
		return
	}
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(c.LastTransitionTime.Time, now), c.Message)
	}
	_ = w.Flush()
}

func describeRuns(out io.Writer, runs []trainingv1alpha1.RunRecord) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintln(out, "Ended runs:")
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  RUN\tREASON\tCLASS\tMESSAGE")
	for _, r := range runs {
		fmt.Fprintf(w, "  %d\t%s\t%s\t%s\n", r.Run, r.Reason, orDash(string(r.Class)), r.Message)
	}
	_ = w.Flush()
}

func describePods(out io.Writer, pods []corev1.Pod) {
	fmt.Fprintln(out, "Pods of the current run:")
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
		fmt.Fprintf(w, "  %d\t%s\t%s\t%t\t%d\n", i, pods[i].Name, orDash(string(pods[i].Status.Phase)), podReady(&pods[i]), restarts)
	}
	_ = w.Flush()
}

// describeEvents lists the events of an object, oldest first. Events are
// optional: a user who may not list them still gets the rest.
func (do *describeOptions) describeEvents(ctx context.Context, s *session, kindName, name string, now time.Time) error {
	var events corev1.EventList
	err := s.c.List(ctx, &events, client.InNamespace(s.namespace), client.MatchingFields{
		"involvedObject.kind": kindName, "involvedObject.name": name,
	})
	fmt.Fprintln(do.Streams.Out, "Events:")
	if err != nil {
		fmt.Fprintf(do.Streams.Out, "  <not shown: %v>\n", explainCore(err, "events", "list", "", s.namespace))
		return nil
	}
	if len(events.Items) == 0 {
		fmt.Fprintln(do.Streams.Out, "  <none>")
		return nil
	}
	sort.SliceStable(events.Items, func(i, j int) bool {
		return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j]))
	})
	w := tabwriter.NewWriter(do.Streams.Out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  TYPE\tREASON\tAGE\tMESSAGE")
	for i := range events.Items {
		e := &events.Items[i]
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", e.Type, e.Reason, age(eventTime(e), now), strings.TrimSpace(e.Message))
	}
	return w.Flush()
}

func eventTime(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
