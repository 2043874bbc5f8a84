package train

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/resource"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// step is one move of the fake operator: change the job (and its pods),
// then wait until the CLI showed the change.
type step struct {
	do     func(ctx context.Context, c client.Client) error
	expect string
}

// fakeOperator plays the TrainingJob operator and the backend for a
// waiting CLI: it moves the job through its phases one step at a time,
// each after the CLI has shown the previous one, so no state is skipped
// however loaded the machine is.
func fakeOperator(ctx context.Context, c client.Client, out fmt.Stringer, steps []step) error {
	for i, s := range steps {
		if err := s.do(ctx, c); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		for s.expect != "" && !strings.Contains(out.String(), s.expect) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("step %d: the CLI never showed %q; it showed:\n%s", i, s.expect, out.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

func jobStatus(ns, name string, mutate func(*trainingv1alpha1.TrainingJobStatus)) func(context.Context, client.Client) error {
	return func(ctx context.Context, c client.Client) error {
		for {
			var tj trainingv1alpha1.TrainingJob
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj)
			if err == nil {
				mutate(&tj.Status)
				err = c.Status().Update(ctx, &tj)
			}
			if err == nil {
				return nil
			}
			if ctx.Err() != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond) // The job may not exist yet, or a write conflicted: try again.
		}
	}
}

func podsOfRun(ns, job string, ready bool, names ...string) func(context.Context, client.Client) error {
	return func(ctx context.Context, c client.Client) error {
		for i, role := range names {
			pod := &corev1.Pod{}
			pod.Namespace, pod.Name = ns, fmt.Sprintf("%s-%s-r1", job, strings.ToLower(role))
			if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				pod.Labels = map[string]string{
					trainingv1alpha1.LabelJobName: job, trainingv1alpha1.LabelRun: "1",
					labelReplicaType: strings.ToLower(role), labelReplicaIndex: fmt.Sprint(i),
				}
				pod.Spec.Containers = []corev1.Container{{Name: "pytorch", Image: "example.test/train:1"}}
				if err := c.Create(ctx, pod); err != nil {
					return err
				}
			}
			if ready {
				pod.Status.Phase = corev1.PodRunning
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				if err := c.Status().Update(ctx, pod); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

func running(st *trainingv1alpha1.TrainingJobStatus) {
	st.Phase, st.Run = trainingv1alpha1.PhaseRunning, 1
	setCondition(st, trainingv1alpha1.ConditionQueued, metav1.ConditionFalse, "Admitted")
	setCondition(st, trainingv1alpha1.ConditionRunning, metav1.ConditionTrue, "Running")
}

func succeeded(st *trainingv1alpha1.TrainingJobStatus) {
	st.Phase, st.Duration = trainingv1alpha1.PhaseSucceeded, "5m0s"
	setCondition(st, trainingv1alpha1.ConditionRunning, metav1.ConditionFalse, "Succeeded")
	setCondition(st, commonv1alpha1.ConditionSucceeded, metav1.ConditionTrue, "Succeeded")
}

// submitWithOperator runs `mlp train submit` while the fake operator plays
// steps, and returns what the CLI printed.
func submitWithOperator(t *testing.T, ns string, tweak func(*util.Options), out io.Writer, outText fmt.Stringer, steps []step, args ...string) clitest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	// The CLI first shows the job as created, before any status: the fake
	// operator waits for that line, or its first step could land before
	// the CLI's first read and the line would never be printed.
	created := step{do: noop, expect: args[0] + ": -"}
	opErr := make(chan error, 1)
	go func() { opErr <- fakeOperator(ctx, clitest.AdminClient(t), outText, append([]step{created}, steps...)) }()
	r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) {
		// The progress goes to stderr and the object to stdout; out has
		// both, in their order, and r.Err stderr alone.
		o.Streams.Out, o.Streams.ErrOut = out, io.MultiWriter(out, o.Streams.ErrOut)
		o.Now = time.Now
		if tweak != nil {
			tweak(o)
		}
	}, append([]string{"train", "submit"}, args...)...)
	if err := <-opErr; err != nil {
		t.Fatalf("fake operator: %v (CLI exit %d, stderr %q)", err, r.Code, r.Err)
	}
	r.Out = outText.String()
	return r
}

// TestSubmitFollowsTheJobToSuccess submits from flags and follows the job
// through Queued (with its place in the queue once known), admission, pods
// becoming ready, training progress and success, one plain line per change
// (no terminal), and exits 0.
func TestSubmitFollowsTheJobToSuccess(t *testing.T) {
	ns := clitest.NewNamespace(t)
	out := &clitest.SyncBuffer{}
	// An hour between polls: only the watches can show the steps.
	noPolling := func(o *util.Options) { o.PollInterval = time.Hour }
	r := submitWithOperator(t, ns, noPolling, out, out, []step{
		{do: jobStatus(ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
			st.Phase = trainingv1alpha1.PhaseQueued
			setCondition(st, trainingv1alpha1.ConditionQueued, metav1.ConditionTrue, "Queued")
		}), expect: "job: Queued\n"},
		{do: jobStatus(ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
			st.Queue = &commonv1alpha1.QueueStatus{LocalQueue: "team-a", Position: ptr.To[int32](2)}
		}), expect: "job: Queued (position 2 in team-a)\n"},
		{do: podsOfRun(ns, "job", false, "Master", "Worker"), expect: ""},
		{do: jobStatus(ns, "job", running), expect: "job: Running, admitted, pods ready 0/2, run 1, restarts 0\n"},
		{do: podsOfRun(ns, "job", true, "Master", "Worker"), expect: "job: Running, admitted, pods ready 2/2, run 1, restarts 0\n"},
		{do: jobStatus(ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
			st.Progress = &trainingv1alpha1.TrainingProgress{Step: 50, TotalSteps: 100, Percent: ptr.To[int32](50), Epoch: 1,
				Metrics: map[string]string{"loss": "0.3"}, LastReportTime: metav1.Now()}
		}), expect: "pods ready 2/2, run 1, restarts 0, step 50/100 (50%) epoch 1 loss=0.3\n"},
		{do: jobStatus(ns, "job", succeeded), expect: ""},
	}, "job", "--image", "example.test/train:1", "--workers", "2", "--queue", "team-a", "--", "python", "train.py")
	if r.Code != util.ExitOK {
		t.Fatalf("exit %d, want 0; stderr %q, stdout:\n%s", r.Code, r.Err, r.Out)
	}
	want := `trainingjob.training.mlplatform.dev/job created
job: -
job: Queued
job: Queued (position 2 in team-a)
job: Running, admitted, pods ready 0/2, run 1, restarts 0
job: Running, admitted, pods ready 2/2, run 1, restarts 0
job: Running, admitted, pods ready 2/2, run 1, restarts 0, step 50/100 (50%) epoch 1 loss=0.3
job: Succeeded, admitted, pods ready 2/2, run 1, restarts 0, step 50/100 (50%) epoch 1 loss=0.3
TrainingJob "job" succeeded after 5m0s
`
	// The watch may see the two pods become ready one by one, or
	// together: the line between is left out of the comparison.
	got := regexp.MustCompile(`(?m)^.*pods ready 1/2.*\n`).ReplaceAllString(r.Out, "")
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s", r.Out, want)
	}
	var tj trainingv1alpha1.TrainingJob
	if err := clitest.AdminClient(t).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "job"}, &tj); err != nil {
		t.Fatal(err)
	}
	if tj.Spec.QueueName != "team-a" || tj.Spec.Workers != 2 || strings.Join(tj.Spec.Command, " ") != "python train.py" {
		t.Errorf("created spec %+v does not carry the flags", tj.Spec)
	}
}

func failed(pod string) func(*trainingv1alpha1.TrainingJobStatus) {
	return func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase = trainingv1alpha1.PhaseFailed
		setCondition(st, commonv1alpha1.ConditionFailed, metav1.ConditionTrue, "JobFailed")
		st.Failure = &trainingv1alpha1.Failure{
			Reason: "JobFailed", Cause: "Error", Class: trainingv1alpha1.FailureClassUser, Message: "PyTorchJob job-r1 failed",
			Pod: pod, Container: "pytorch", ExitCode: 1, TerminationMessage: "ValueError: bad batch",
		}
	}
}

// TestSubmitFailedPrintsReasonAndLog exits 1 with the failure reason and
// the last lines of the failing pod's log.
func TestSubmitFailedPrintsReasonAndLog(t *testing.T) {
	ns := clitest.NewNamespace(t)
	out := &clitest.SyncBuffer{}
	var asked []string
	logs := func(_ context.Context, _ *kube.Session, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
		asked = append(asked, fmt.Sprintf("%s/%s tail=%d", pod.Name, opts.Container, ptr.Deref(opts.TailLines, -1)))
		return io.NopCloser(strings.NewReader("epoch 1\nTraceback (most recent call last):\nValueError: bad batch\n")), nil
	}
	r := submitWithOperator(t, ns, func(o *util.Options) { o.Logs = logs }, out, out, []step{
		{do: podsOfRun(ns, "job", true, "Master"), expect: ""},
		{do: jobStatus(ns, "job", running), expect: "pods ready 1/1"},
		{do: jobStatus(ns, "job", failed("job-master-r1")), expect: ""},
	}, "job", "--image", "example.test/train:1")
	if r.Code != util.ExitFailed {
		t.Fatalf("exit %d, want 1; stderr %q", r.Code, r.Err)
	}
	for _, want := range []string{
		`TrainingJob "job" failed: Error`, "message: PyTorchJob job-r1 failed", "pod job-master-r1, container pytorch, exit code 1",
		"last 20 lines of the log of job-master-r1:\nepoch 1\nTraceback (most recent call last):\nValueError: bad batch\n",
	} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.Err)
		}
	}
	if strings.Join(asked, ",") != "job-master-r1/pytorch tail=20" {
		t.Errorf("logs read: %q", asked)
	}
}

// TestSubmitFailedWithoutLogsShowsTerminationMessage: when the log cannot
// be read (no kubelet here, a deleted node in a cluster) the container's
// termination message stands in, and the reason is said.
func TestSubmitFailedWithoutLogsShowsTerminationMessage(t *testing.T) {
	ns := clitest.NewNamespace(t)
	out := &clitest.SyncBuffer{}
	r := submitWithOperator(t, ns, nil, out, out, []step{
		{do: podsOfRun(ns, "job", true, "Master"), expect: ""},
		{do: jobStatus(ns, "job", failed("job-master-r1")), expect: ""},
	}, "job", "--image", "example.test/train:1")
	if r.Code != util.ExitFailed || !strings.Contains(r.Err, "termination message of job-master-r1:\nValueError: bad batch\n") ||
		!strings.Contains(r.Err, "(no log: the test control plane has no kubelet)") {
		t.Errorf("exit %d, stderr:\n%s", r.Code, r.Err)
	}
}

// TestSubmitTimeoutAndInterruptExit2 leave the job running and say so.
func TestSubmitTimeoutAndInterruptExit2(t *testing.T) {
	ns := clitest.NewNamespace(t)
	r := clitest.Run(t, ns, "train", "submit", "slow", "--image", "i", "--timeout", "1s")
	if r.Code != util.ExitIncomplete || !strings.Contains(r.Err, `timed out after 1s waiting for TrainingJob "slow"; it keeps running`) {
		t.Errorf("timeout: exit %d, stderr %q", r.Code, r.Err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &clitest.SyncBuffer{}
	go func() {
		for !strings.Contains(out.String(), "slow2: -") {
			time.Sleep(20 * time.Millisecond)
		}
		cancel() // What Ctrl-C does to the real binary's context.
	}()
	r = clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) { o.Streams.ErrOut = io.MultiWriter(out, o.Streams.ErrOut) }, "train", "submit", "slow2", "--image", "i")
	if r.Code != util.ExitIncomplete || !strings.Contains(r.Err, `interrupted waiting for TrainingJob "slow2"; it keeps running: follow it with `+"`mlp train wait slow2`") {
		t.Errorf("interrupt: exit %d, stderr %q", r.Code, r.Err)
	}
	var list trainingv1alpha1.TrainingJobList
	if err := clitest.AdminClient(t).List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 2 {
		t.Errorf("jobs after timeout and interrupt: %d (err %v), want both still there", len(list.Items), err)
	}
}

// TestSubmitProgressBarOnTerminal draws a bar with percent and ETA through
// a pseudo-terminal, redrawing one line.
func TestSubmitProgressBarOnTerminal(t *testing.T) {
	ns := clitest.NewNamespace(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ptmx.Close() }()
	screen := &clitest.SyncBuffer{}
	go func() { _, _ = io.Copy(screen, ptmx) }()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 24, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	r := submitWithOperator(t, ns, func(o *util.Options) { o.Terminal, o.Streams.ErrOut = util.IsTerminal, tty }, tty, screen, []step{
		{do: podsOfRun(ns, "job", true, "Master"), expect: ""},
		{do: jobStatus(ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
			running(st)
			st.Progress = &trainingv1alpha1.TrainingProgress{Step: 40, TotalSteps: 100, Percent: ptr.To[int32](40),
				EstimatedCompletionTime: &metav1.Time{Time: time.Now().Add(90 * time.Minute)}, LastReportTime: metav1.Now()}
		}), expect: "step 40/100 (40%)"},
		{do: jobStatus(ns, "job", succeeded), expect: "succeeded"},
	}, "job", "--image", "example.test/train:1")
	_ = tty.Close()
	if r.Code != util.ExitOK {
		t.Fatalf("exit %d; stderr %q; screen %q", r.Code, r.Err, r.Out)
	}
	for _, want := range []string{
		"\r\x1b[K[============                  ] job: Running, admitted, pods ready 1/1, run 1, restarts 0, step 40/100 (40%) ETA 89m",
		"\r\x1b[Kjob: -",
	} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, r.Out)
		}
	}
	if strings.Count(r.Out, "job: Running") < 1 || strings.Contains(r.Out, "job: -\r\n") {
		t.Errorf("the bar printed lines instead of redrawing one:\n%q", r.Out)
	}
}

// TestSubmitProgressFitsAnEightyColumnTerminal redraws the bar on stderr,
// a pseudo-terminal of 80 columns, never wider than 79 columns (a line of
// the terminal's width or more wraps and leaves a stale row per redraw),
// while stdout gets only what -o asked for.
func TestSubmitProgressFitsAnEightyColumnTerminal(t *testing.T) {
	ns := clitest.NewNamespace(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ptmx.Close() }()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	screen := &clitest.SyncBuffer{}
	go func() { _, _ = io.Copy(screen, ptmx) }()
	stdout := &clitest.SyncBuffer{}
	r := submitWithOperator(t, ns, func(o *util.Options) { o.Terminal, o.Streams.Out, o.Streams.ErrOut = util.IsTerminal, stdout, tty }, tty, screen, []step{
		{do: podsOfRun(ns, "job", true, "Master"), expect: ""},
		{do: jobStatus(ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
			running(st)
			st.Progress = &trainingv1alpha1.TrainingProgress{Step: 40, TotalSteps: 100, Percent: ptr.To[int32](40),
				Metrics: map[string]string{"loss": "0.123456", "accuracy": "0.987654"}, LastReportTime: metav1.Now()}
		}), expect: "[============                  ] job: Running"},
		{do: jobStatus(ns, "job", succeeded), expect: "succeeded"},
	}, "job", "--image", "example.test/train:1", "-o", "name")
	_ = tty.Close()
	if r.Code != util.ExitOK {
		t.Fatalf("exit %d; screen %q", r.Code, r.Out)
	}
	if got := stdout.String(); got != "trainingjob.training.mlplatform.dev/job\n" {
		t.Errorf("stdout %q, want only the name", got)
	}
	cut := false
	for _, redraw := range strings.Split(r.Out, "\r\x1b[K")[1:] {
		line, _, _ := strings.Cut(redraw, "\r")
		if n := len([]rune(line)); n >= 80 {
			t.Errorf("redrawn line of %d columns on an 80-column terminal: %q", n, line)
		}
		cut = cut || strings.HasSuffix(line, "…")
	}
	if !cut {
		t.Errorf("no line was cut to the width, the test shows nothing:\n%q", r.Out)
	}
}

// TestSubmitDryRun shows what would be created: client-side as built, and
// server-side with the API server's defaults; nothing is created.
func TestSubmitDryRun(t *testing.T) {
	ns := clitest.NewNamespace(t)
	r := clitest.Run(t, ns, "train", "submit", "job", "--image", "example.test/train:1", "--workers", "2", "--gpus", "1",
		"--memory", "8Gi", "--env", "EPOCHS=3", "--checkpoint-size", "10Gi", "--feature-store", "fs", "--backend", "native",
		"--dry-run=client", "-o", "yaml", "--", "python", "train.py")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	clitest.Golden(t, "submit-dry-run-client", clitest.Normalize(r.Out, ns))

	r = clitest.Run(t, ns, "train", "submit", "job", "--image", "example.test/train:1", "--dry-run=server", "-o", "yaml")
	if r.Code != 0 || !strings.Contains(r.Out, "cleanPodPolicy: Running") || !strings.Contains(r.Out, "uid:") {
		t.Errorf("server dry run: exit %d, stderr %q, out:\n%s", r.Code, r.Err, r.Out)
	}
	var list trainingv1alpha1.TrainingJobList
	if err := clitest.AdminClient(t).List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("dry runs created %d TrainingJobs (err %v)", len(list.Items), err)
	}
}

// TestSubmitFromFile creates the file's job in the command line's
// namespace and refuses files that are not one of our TrainingJobs.
func TestSubmitFromFile(t *testing.T) {
	ns := clitest.NewNamespace(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("job.yaml", "apiVersion: training.mlplatform.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: fromfile\nspec:\n  framework: pytorch\n  image: example.test/train:1\n")
	if r := clitest.Run(t, ns, "train", "submit", "-f", good, "--no-wait"); r.Code != 0 || r.Out != "trainingjob.training.mlplatform.dev/fromfile created\n" {
		t.Fatalf("exit %d, out %q, stderr %q", r.Code, r.Out, r.Err)
	}
	if err := clitest.AdminClient(t).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "fromfile"}, &trainingv1alpha1.TrainingJob{}); err != nil {
		t.Errorf("the file's job was not created: %v", err)
	}
	for name, tc := range map[string]struct{ content, want string }{
		"kubeflow kind":   {"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: x\n", "not a TrainingJob of training.mlplatform.dev"},
		"unknown field":   {"apiVersion: training.mlplatform.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: typo\nspec:\n  framework: pytorch\n  image: i\n  wrokers: 2\n", `unknown field "spec.wrokers"`},
		"not an object":   {"- a\n- b\n", "is not a YAML or JSON object"},
		"no name":         {"apiVersion: training.mlplatform.dev/v1alpha1\nkind: TrainingJob\nspec: {}\n", "has no metadata.name"},
		"other namespace": {"apiVersion: training.mlplatform.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: x\n  namespace: elsewhere\n", "does not match the namespace of the command line"},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, "train", "submit", "-f", write(strings.ReplaceAll(name, " ", "-")+".yaml", tc.content), "--no-wait")
			if r.Code != util.ExitFailed || !strings.Contains(r.Err, tc.want) {
				t.Errorf("exit %d, stderr %q, want %q", r.Code, r.Err, tc.want)
			}
		})
	}
}

// TestWaitRidesOutAnAPIServerRestart keeps waiting through an apiserver
// outage and still reports the outcome: an outage is not a failure.
func TestWaitRidesOutAnAPIServerRestart(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	if err := c.Create(context.Background(), clitest.TrainingJob(ns, "job", 1)); err != nil {
		t.Fatal(err)
	}
	out := &clitest.SyncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.EventuallyTimeout)
	defer cancel()
	opErr := make(chan error, 1)
	go func() {
		opErr <- fakeOperator(ctx, c, out, []step{
			{do: func(context.Context, client.Client) error { return nil }, expect: "job: -\n"},
			{do: func(context.Context, client.Client) error { return clitest.Env.RestartAPIServer() }},
			{do: jobStatus(ns, "job", succeeded)},
		})
	}()
	r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) { o.Streams.ErrOut = io.MultiWriter(out, o.Streams.ErrOut) }, "train", "wait", "job")
	if err := <-opErr; err != nil {
		t.Fatal(err)
	}
	if r.Code != util.ExitOK || !strings.HasSuffix(out.String(), "TrainingJob \"job\" succeeded after 5m0s\n") {
		t.Errorf("exit %d, stderr %q, out:\n%s", r.Code, r.Err, out.String())
	}
	t.Logf("output across the restart:\n%s", out.String())
}

// endless is a stream without end (what -f /dev/zero reads). It gives up
// after far more than any limit, so that a CLI without one fails the test
// instead of filling the memory.
type endless struct{ read int }

const endlessGiveUp = 64 << 20

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= endlessGiveUp {
		return 0, fmt.Errorf("read %d bytes without stopping", e.read)
	}
	for i := range p {
		p[i] = '#'
	}
	e.read += len(p)
	return len(p), nil
}

// TestSubmitFileIsBounded refuses a file or stream larger than the API
// server accepts, reading no more than that, and still reads a job from
// standard input.
func TestSubmitFileIsBounded(t *testing.T) {
	ns := clitest.NewNamespace(t)
	const job = "apiVersion: training.mlplatform.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: %s\nspec:\n  framework: pytorch\n  image: example.test/train:1\n"
	t.Run("regular file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "big.yaml")
		padding := "# " + strings.Repeat("x", 4<<20) + "\n"
		if err := os.WriteFile(path, []byte(padding+fmt.Sprintf(job, "big")), 0o600); err != nil {
			t.Fatal(err)
		}
		r := clitest.Run(t, ns, "train", "submit", "-f", path, "--no-wait")
		if r.Code != util.ExitFailed || !strings.Contains(r.Err, path+" is larger than 3 MiB") {
			t.Errorf("exit %d, stderr %q", r.Code, r.Err)
		}
	})
	t.Run("endless stdin", func(t *testing.T) {
		in := &endless{}
		r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, func(o *util.Options) { o.Streams.In = in }, "train", "submit", "-f", "-", "--no-wait")
		if r.Code != util.ExitFailed || !strings.Contains(r.Err, "- is larger than 3 MiB") || in.read > resource.MaxManifestBytes+1 {
			t.Errorf("exit %d, stderr %q, read %d bytes (limit %d)", r.Code, r.Err, in.read, resource.MaxManifestBytes)
		}
	})
	t.Run("dev zero", func(t *testing.T) {
		r := clitest.Run(t, ns, "train", "submit", "-f", "/dev/zero", "--no-wait")
		if r.Code != util.ExitFailed || !strings.Contains(r.Err, "/dev/zero is larger than 3 MiB") {
			t.Errorf("exit %d, stderr %q", r.Code, r.Err)
		}
	})
	t.Run("stdin within the limit", func(t *testing.T) {
		r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, func(o *util.Options) { o.Streams.In = strings.NewReader(fmt.Sprintf(job, "piped")) },
			"train", "submit", "-f", "-", "--no-wait")
		if r.Code != 0 || r.Out != "trainingjob.training.mlplatform.dev/piped created\n" {
			t.Errorf("exit %d, out %q, stderr %q", r.Code, r.Out, r.Err)
		}
	})
	var list trainingv1alpha1.TrainingJobList
	if err := clitest.AdminClient(t).List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Errorf("%d TrainingJobs (err %v), want only the piped one", len(list.Items), err)
	}
}
