package train

import (
	"context"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// hostileJob creates a pending TrainingJob whose every free text in
// status is clitest.Hostile, with a Warning event that says it too.
func hostileJob(t *testing.T, ns, name string) {
	t.Helper()
	c := clitest.AdminClient(t)
	clitest.CreateAll(t, clitest.TrainingJob(ns, name, 1))
	clitest.SetJobStatus(t, c, ns, name, func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase, st.Run, st.Duration = trainingv1alpha1.PhasePending, 1, clitest.Hostile
		st.Queue = &commonv1alpha1.QueueStatus{LocalQueue: clitest.Hostile, Position: ptr.To[int32](1)}
		setCondition(st, trainingv1alpha1.ConditionQueued, metav1.ConditionTrue, "Waiting")
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: trainingv1alpha1.ConditionRunning, Status: metav1.ConditionFalse, Reason: "PodsRefused", Message: clitest.Hostile})
		st.Progress = &trainingv1alpha1.TrainingProgress{Step: 1, Metrics: map[string]string{"loss": clitest.Hostile}, LastReportTime: metav1.Now()}
		st.Failure = &trainingv1alpha1.Failure{
			Reason: "JobFailed", Cause: clitest.Hostile, Message: clitest.Hostile,
			Pod: name + "-0", Container: "pytorch", ExitCode: 1, TerminationMessage: clitest.Hostile,
		}
		st.Runs = []trainingv1alpha1.RunRecord{{Run: 1, Reason: "Error", Message: clitest.Hostile}}
	})
	if err := warningEvent(ns, name, "BackOff", clitest.Hostile)(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// failHostileJob ends the job as failed; its failure keeps the hostile
// texts.
func failHostileJob(t *testing.T, ns, name string) {
	t.Helper()
	clitest.SetJobStatus(t, clitest.AdminClient(t), ns, name, func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase = trainingv1alpha1.PhaseFailed
		setCondition(st, commonv1alpha1.ConditionFailed, metav1.ConditionTrue, "JobFailed")
	})
}

// assertEscaped fails the test when out holds anything a terminal acts
// upon, or lacks any of the escaped texts in want.
func assertEscaped(t *testing.T, what, out string, want ...string) {
	t.Helper()
	if found := clitest.TerminalControls(out); len(found) > 0 {
		t.Errorf("%s prints control characters %v:\n%q", what, found, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// TestDescribeEscapesClusterText: every text describe prints from the
// cluster (fields, conditions, ended runs, failure, events) has its
// control characters written as visible escapes, on one line.
func TestDescribeEscapesClusterText(t *testing.T) {
	ns := clitest.NewNamespace(t)
	hostileJob(t, ns, "job")
	r := clitest.Run(t, ns, "train", "describe", "job")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	assertEscaped(t, "describe", r.Out,
		"Status:           Pending (position 1 in "+clitest.HostileLine+")\n",
		"Duration:         "+clitest.HostileLine+"\n",
		"Waiting on:       PodsRefused: "+clitest.HostileLine+"\n",
		"): "+clitest.HostileLine+"\n", // Last warning
		"loss="+clitest.HostileLine+"\n",
		"Failure message:  "+clitest.HostileLine+"\n",
		"Running  False   PodsRefused  400d  "+clitest.HostileLine+"\n",
		"1    Error   -      "+clitest.HostileLine+"\n",
		"Warning  BackOff  400d  "+clitest.HostileLine+"\n",
	)
}

// TestWaitEscapesClusterText: the progress line of wait (the waiting
// condition, the warning, the queue, the metrics), its failure report and
// the termination message standing in for the log have their control
// characters escaped; the termination message keeps its lines.
func TestWaitEscapesClusterText(t *testing.T) {
	ns := clitest.NewNamespace(t)
	hostileJob(t, ns, "job")
	r := clitest.Run(t, ns, "train", "wait", "job", "--timeout", "1s")
	if r.Code != util.ExitIncomplete {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	assertEscaped(t, "the progress line", r.Err,
		"job: Pending, queued (position 1 in "+clitest.HostileLine+"), pods ready 0/1, run 1, restarts 0, step 1 loss="+clitest.HostileLine+
			", PodsRefused: "+clitest.HostileLine+", last warning BackOff: "+clitest.HostileLine+"\n")

	failHostileJob(t, ns, "job")
	r = clitest.Run(t, ns, "train", "wait", "job")
	if r.Code != util.ExitFailed {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	assertEscaped(t, "the failure report", r.Err,
		`TrainingJob "job" failed: `+clitest.HostileLine+"\n",
		"  message: "+clitest.HostileLine+"\n",
		"termination message of job-0:\n"+clitest.HostileText+"\n",
	)
}

// TestWaitEscapesTheFailedLogTail: the last lines of the failing pod's log
// that a failed wait prints keep their lines, with every other control
// character, and bytes that are not UTF-8, escaped. (mlp train logs passes
// the log through as it is, as kubectl logs does.)
func TestWaitEscapesTheFailedLogTail(t *testing.T) {
	ns := clitest.NewNamespace(t)
	hostileJob(t, ns, "job")
	failHostileJob(t, ns, "job")
	clitest.CreateAll(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-0"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "example.test/train:1"}}},
	})
	log := "step 1\r\n" + clitest.Hostile + "\x9b2J\tdone\n"
	r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, func(o *util.Options) {
		o.Logs = func(context.Context, *kube.Session, *corev1.Pod, *corev1.PodLogOptions) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(log)), nil
		}
	}, "train", "wait", "job")
	if r.Code != util.ExitFailed {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	assertEscaped(t, "the log tail", r.Err,
		"last 20 lines of the log of job-0:\nstep 1\n"+clitest.HostileText+`\x9b2J`+"\tdone\n")
}

// TestListEscapesClusterText: the API server's table and custom columns
// print cells with their control characters escaped; a table cell ends at
// its first line break, as kubectl's does.
func TestListEscapesClusterText(t *testing.T) {
	ns := clitest.NewNamespace(t)
	hostileJob(t, ns, "job")
	cut, _, _ := strings.Cut(clitest.HostileLine, `\r`)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"table":          {args: []string{"train", "list", "-o", "wide"}, want: cut + "..."},
		"custom columns": {args: []string{"train", "list", "-o", "custom-columns=NAME:.metadata.name,MESSAGE:.status.failure.message"}, want: " " + clitest.HostileLine + "\n"},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, tc.args...)
			if r.Code != 0 {
				t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
			}
			assertEscaped(t, name, r.Out, tc.want)
		})
	}
}

// TestTrainLogsPassTheLogThrough: mlp train logs is the training's own
// output, which the user asked for: colours and progress bars reach the
// terminal as they are, as with kubectl logs.
func TestTrainLogsPassTheLogThrough(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	clitest.CreateAll(t, clitest.TrainingJob(ns, "job", 1))
	clitest.SetJobStatus(t, c, ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Run, st.Phase = 1, trainingv1alpha1.PhaseSucceeded
		setCondition(st, commonv1alpha1.ConditionSucceeded, metav1.ConditionTrue, "Completed")
	})
	runPod(t, c, ns, "job", 1, "Master", 0, true)
	log := "\x1b[32mepoch 1\x1b[0m 10%\r50%\r100%\n"
	r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, func(o *util.Options) {
		o.Logs = func(context.Context, *kube.Session, *corev1.Pod, *corev1.PodLogOptions) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(log)), nil
		}
	}, "train", "logs", "job", "--rank", "0")
	if r.Code != 0 || r.Out != log {
		t.Errorf("exit %d, out %q, want the log as it is: %q", r.Code, r.Out, log)
	}
}
