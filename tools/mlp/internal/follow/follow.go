// Package follow follows a TrainingJob to its end for `mlp train submit`
// and `mlp train wait`: its state, its pods, its progress and, when it
// failed, why.
package follow

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/watch"
)

// jobState is what a waiting command shows of a TrainingJob.
type jobState struct {
	Name  string
	Phase string
	Queue string // "queued", "admitted" or "" without a queue
	// Place is the job's place in its LocalQueue while it waits there
	// and the operator knows it, such as "position 2 in team-queue".
	Place    string
	Ready    int
	Pods     int
	Run      int32
	Restarts int32
	Progress Progress
	// Waiting is the condition that holds the job, "Reason: message".
	Waiting string
	// Warning is the job's latest Warning event while its pods are pending.
	Warning string
}

// line is the one-line summary, the cluster's text in it escaped; it
// leaves out the ETA, which changes every second, so that the plain mode
// prints a line only when something happened.
func (s jobState) line(now time.Time, withETA bool) string {
	head := s.Name + ": " + output.OrDash(s.Phase)
	switch {
	case s.Phase == string(trainingv1alpha1.PhaseQueued) && s.Place != "":
		// As mlp train describe shows it: "Queued (position 2 in team-queue)".
		head += " (" + s.Place + ")"
	case s.Phase == string(trainingv1alpha1.PhaseQueued) && s.Queue == "queued":
		// The phase says it already.
	case s.Place != "":
		head += ", " + s.Queue + " (" + s.Place + ")"
	case s.Queue != "":
		head += ", " + s.Queue
	}
	parts := []string{head}
	if s.Pods > 0 {
		parts = append(parts, fmt.Sprintf("pods ready %d/%d", s.Ready, s.Pods))
	}
	if s.Run > 0 {
		parts = append(parts, fmt.Sprintf("run %d", s.Run), fmt.Sprintf("restarts %d", s.Restarts))
	}
	p := s.Progress
	if !withETA {
		p.ETA = time.Time{}
	}
	if sum := p.Summary(now); sum != "" {
		parts = append(parts, sum)
	}
	for _, x := range []string{s.Waiting, s.Warning} {
		if x != "" {
			parts = append(parts, x)
		}
	}
	return escape.Line(strings.Join(parts, ", "))
}

// observe reads the job's state: the TrainingJob and the pods of its
// current run, selected by our own labels whatever the backend.
func observe(ctx context.Context, s *kube.Session, u *unstructured.Unstructured) (jobState, *trainingv1alpha1.TrainingJob, error) {
	tj, err := kube.Typed[trainingv1alpha1.TrainingJob](u)
	if err != nil {
		return jobState{}, nil, err
	}
	st := jobState{
		Name: tj.Name, Phase: string(tj.Status.Phase), Run: tj.Status.Run, Restarts: tj.Status.RestartCount,
		Progress: ReadProgress(u),
	}
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainingv1alpha1.ConditionQueued); c != nil {
		st.Queue = map[bool]string{true: "queued", false: "admitted"}[c.Status == "True"]
		if c.Status == "True" {
			st.Place = QueuePlace(tj)
		}
	}
	st.Waiting = ConditionText(WaitingCondition(tj))
	if Pending(tj) {
		st.Warning = warningText(LatestWarning(ctx, s, tj))
	}
	if tj.Status.Run > 0 {
		st.Pods = int(tj.Pods())
		pods, err := RunPods(ctx, s, tj.Name, tj.Status.Run)
		if apierrors.IsForbidden(err) {
			// A user who may read the job but not its pods still gets
			// the phase and the progress.
			st.Pods = 0
			return st, tj, nil
		}
		if err != nil {
			return jobState{}, nil, err
		}
		for i := range pods {
			if kube.PodReady(&pods[i]) {
				st.Ready++
			}
		}
	}
	return st, tj, nil
}

// RunPods lists the pods of one run of a TrainingJob.
func RunPods(ctx context.Context, s *kube.Session, job string, run int32) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := s.C.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{
		trainingv1alpha1.LabelJobName: job,
		trainingv1alpha1.LabelRun:     strconv.Itoa(int(run)),
	})
	if err != nil {
		return nil, kube.ExplainCore(err, "pods", "list", "", s.Namespace)
	}
	return pods.Items, nil
}

// display shows the changing state of a job.
type display interface {
	update(st jobState, now time.Time)
	// note prints a message on its own line.
	note(msg string)
	done()
}

// plainDisplay prints one line per change, for logs and CI.
type plainDisplay struct {
	w    io.Writer
	last string
}

func (d *plainDisplay) update(st jobState, now time.Time) {
	key := st.line(now, false)
	if key == d.last {
		return
	}
	d.last = key
	fmt.Fprintln(d.w, st.line(now, true))
}

func (d *plainDisplay) note(msg string) { fmt.Fprintln(d.w, msg) }
func (d *plainDisplay) done()           {}

// barDisplay redraws one line on a terminal: a progress bar with step,
// percent and ETA once the training reports progress, the job's state
// before. The line is cut to the terminal's width, read at every redraw:
// a line as wide as the terminal or wider wraps, and "\r" then only goes
// back to the start of its last row, which leaves a stale row per redraw.
type barDisplay struct {
	w     io.Writer
	width func() int
	drawn bool
}

const barWidth = 30

func (d *barDisplay) update(st jobState, now time.Time) {
	var b strings.Builder
	if p := st.Progress; p.HasPercent {
		filled := int(min(max(p.Percent, 0), 100)) * barWidth / 100
		b.WriteString("[" + strings.Repeat("=", filled) + strings.Repeat(" ", barWidth-filled) + "] ")
	}
	b.WriteString(st.line(now, true))
	fmt.Fprint(d.w, "\r\x1b[K"+fitWidth(b.String(), d.width()))
	d.drawn = true
}

// fitWidth cuts line to less than width columns (one column is left free
// so the cursor never moves to a next row), ending it with "…" when cut.
// A width of 0 or less (unknown) leaves the line whole.
func fitWidth(line string, width int) string {
	r := []rune(line)
	if width <= 1 || len(r) < width {
		return line
	}
	return string(r[:width-2]) + "…"
}

func (d *barDisplay) note(msg string) {
	if d.drawn {
		fmt.Fprint(d.w, "\r\x1b[K")
	}
	fmt.Fprintln(d.w, msg)
	d.drawn = false
}

func (d *barDisplay) done() {
	if d.drawn {
		fmt.Fprintln(d.w)
	}
	d.drawn = false
}

// follower follows one TrainingJob to its end, for submit and wait.
type follower struct {
	*util.Options
	s *kube.Session
}

// Job waits for the TrainingJob name to finish, showing its state on
// stderr; see follower.follow for what it returns.
func Job(ctx context.Context, o *util.Options, s *kube.Session, name string, timeout time.Duration) error {
	return (&follower{Options: o, s: s}).follow(ctx, name, timeout)
}

// newDisplay shows the progress on stderr, so that what a command prints on
// stdout (-o yaml, -o name) stays clean: redrawn in place on a terminal,
// one line per change otherwise.
func (fo *follower) newDisplay() display {
	w := fo.Streams.ErrOut
	if fo.Terminal(w) {
		return &barDisplay{w: w, width: func() int { return fo.Width(w) }}
	}
	return &plainDisplay{w: w}
}

// follow waits for a TrainingJob to finish, showing its state. It returns
// nil when the job succeeded and a util.ExitError otherwise: 1 when it failed
// (with the reason and the failing pod's last log lines), 2 when the wait
// ended first (timeout or interrupt), saying the job keeps running. The job
// is read again when a watch of it or of its pods reports a change; API
// errors while waiting (an apiserver restart) are shown and the read is
// tried again every PollInterval until it succeeds.
func (fo *follower) follow(ctx context.Context, name string, timeout time.Duration) error {
	// The watches serve this follow only: they end when it returns, not
	// when the caller's context does.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	changed := watch.Job(ctx, fo.s, name, fo.PollInterval)
	d := fo.newDisplay()
	defer d.done()
	lastErr := ""
	var uid types.UID
	for {
		retry := false
		u, err := fo.s.Get(ctx, kube.TrainingJobKind, name)
		var st jobState
		var tj *trainingv1alpha1.TrainingJob
		if err == nil {
			st, tj, err = observe(ctx, fo.s, u)
		}
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil && apierrors.IsForbidden(err):
			return err
		case err != nil && apierrors.IsNotFound(err):
			return &util.ExitError{Code: util.ExitFailed, Err: fmt.Errorf("TrainingJob %q was deleted while waiting for it", name)}
		case err == nil && uid != "" && tj.UID != uid:
			// A job of the same name created since is not the one followed.
			return &util.ExitError{Code: util.ExitFailed, Err: fmt.Errorf("TrainingJob %q was deleted while waiting for it (and created again: follow the new one with `mlp train wait %s`)", name, name)}
		case err != nil:
			retry = true
			if msg := err.Error(); msg != lastErr {
				d.note("waiting for the API server: " + escape.Line(msg))
				lastErr = msg
			}
		default:
			lastErr, uid = "", tj.UID
			d.update(st, fo.Now())
			if done, err := fo.outcome(ctx, d, tj); done {
				return err
			}
		}
		if err := fo.waitForChange(ctx, changed, retry); err != nil {
			d.done()
			return incomplete(ctx, name, timeout)
		}
	}
}

// waitForChange returns when the watches report a change, or after
// PollInterval when the last read failed; an error when ctx ended.
func (fo *follower) waitForChange(ctx context.Context, changed <-chan struct{}, retry bool) error {
	var again <-chan time.Time
	if retry {
		again = time.After(fo.PollInterval)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-again:
	}
	return nil
}

func incomplete(ctx context.Context, name string, timeout time.Duration) error {
	why := "interrupted"
	if timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = fmt.Sprintf("timed out after %s", timeout)
	}
	return &util.ExitError{Code: util.ExitIncomplete, Err: fmt.Errorf(
		"%s waiting for TrainingJob %q; it keeps running: follow it with `mlp train wait %s`, stop it with `mlp train delete %s`",
		why, name, name, name)}
}

// outcome reports whether the job finished, and how.
func (fo *follower) outcome(ctx context.Context, d display, tj *trainingv1alpha1.TrainingJob) (bool, error) {
	switch {
	case meta.IsStatusConditionTrue(tj.Status.Conditions, commonv1alpha1.ConditionSucceeded):
		d.done()
		fmt.Fprintf(fo.Streams.ErrOut, "TrainingJob %q succeeded%s\n", tj.Name, durationSuffix(tj.Status.Duration))
		return true, nil
	case meta.IsStatusConditionTrue(tj.Status.Conditions, commonv1alpha1.ConditionFailed):
		d.done()
		fo.printFailure(ctx, tj)
		return true, &util.ExitError{Code: util.ExitFailed}
	}
	return false, nil
}

func durationSuffix(d string) string {
	if d == "" {
		return ""
	}
	return " after " + escape.Line(d)
}

// failureLogLines is how much of the failing pod's log a failed wait prints.
const failureLogLines = 20

// printFailure explains a failed job: the operator's reason and message,
// the failing container, and the last lines of its log. All of it is the
// cluster's text, escaped; the log tail and the termination message keep
// their lines. (mlp train logs, which the user asks for, passes the log
// through as it is, as kubectl logs does.)
func (fo *follower) printFailure(ctx context.Context, tj *trainingv1alpha1.TrainingJob) {
	s, w := fo.s, fo.Streams.ErrOut
	f := tj.Status.Failure
	if f == nil {
		fmt.Fprintf(w, "TrainingJob %q failed\n", tj.Name)
		return
	}
	fmt.Fprintf(w, "TrainingJob %q failed: %s\n", tj.Name, escape.Line(cmp.Or(f.Cause, f.Reason, "Unknown")))
	if f.Message != "" {
		fmt.Fprintf(w, "  message: %s\n", escape.Line(f.Message))
	}
	if f.Pod == "" {
		return
	}
	fmt.Fprintf(w, "  pod %s, container %s, exit code %d\n", escape.Line(f.Pod), escape.Line(output.OrDash(f.Container)), f.ExitCode)
	var pod corev1.Pod
	if err := s.C.Get(ctx, kube.Key(s.Namespace, f.Pod), &pod); err != nil {
		fo.printTermination(f)
		fmt.Fprintf(w, "  (no log: pod %s is gone: %s)\n", escape.Line(f.Pod), escape.Line(kube.ExplainCore(err, "pods", "get", f.Pod, s.Namespace).Error()))
		return
	}
	tail := int64(failureLogLines)
	r, err := fo.Logs(ctx, s, &pod, &corev1.PodLogOptions{Container: cmp.Or(f.Container, TrainingContainer(&pod)), TailLines: &tail})
	if err != nil {
		fo.printTermination(f)
		fmt.Fprintf(w, "  (no log: %s)\n", escape.Line(err.Error()))
		return
	}
	defer func() { _ = r.Close() }()
	fmt.Fprintf(w, "last %d lines of the log of %s:\n", failureLogLines, escape.Line(f.Pod))
	// Line by line, so that no character is split between two escapes.
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		fmt.Fprint(w, escape.Text(line))
		if err != nil {
			return
		}
	}
}

func (fo *follower) printTermination(f *trainingv1alpha1.Failure) {
	if f.TerminationMessage != "" {
		fmt.Fprintf(fo.Streams.ErrOut, "termination message of %s:\n%s\n", escape.Line(f.Pod), escape.Text(strings.TrimRight(f.TerminationMessage, "\n")))
	}
}

// QueuePlace is a queued job's place in its Kueue LocalQueue, such as
// "position 2 in team-queue", as the operator last read it from Kueue;
// empty when the job does not wait in a queue or its place is unknown.
func QueuePlace(tj *trainingv1alpha1.TrainingJob) string {
	q := tj.Status.Queue
	if q == nil {
		return ""
	}
	return output.QueuePlace(q.LocalQueue, q.Position)
}

// TrainingContainer is the container whose log is the training's: the
// default-container annotation kubectl honours, else the first container.
func TrainingContainer(p *corev1.Pod) string {
	if c := p.Annotations["kubectl.kubernetes.io/default-container"]; c != "" {
		return c
	}
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return ""
}
