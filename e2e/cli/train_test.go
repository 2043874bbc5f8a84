package cli

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// trainTimeout bounds a whole training, torch's import on two shared cores
// included.
const trainTimeout = 20 * time.Minute

// submitArgs submits the DDP sample (two pods, a checkpoint volume) with
// mlp's flags; the image runs /opt/ml-platform/train.py by default.
func submitArgs(t *testing.T, name string, trainSteps int, stepSeconds string, extra ...string) []string {
	args := []string{"train", "submit", name, "--image", steps.Image(t, "pytorch"), "--workers", "2",
		"--cpu", "50m", "--memory", "1Gi", "--checkpoint-size", "64Mi",
		"--env", "TRAIN_STEPS=" + strconv.Itoa(trainSteps), "--env", "CHECKPOINT_EVERY=5", "--env", "STEP_SECONDS=" + stepSeconds}
	return append(args, extra...)
}

// TestTrainSubmitFollowsToSuccess: `mlp train submit` creates the sample,
// follows it (phase, the run's pods becoming ready) and exits 0 when it
// succeeded.
func TestTrainSubmitFollowsToSuccess(t *testing.T) {
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-cli-train")
	out, code := mlp(t, trainTimeout, ns, submitArgs(t, "submit", 20, "0.2")...)
	if code != 0 {
		t.Fatalf("mlp train submit exited %d:\n%s", code, out)
	}
	for _, want := range []string{`TrainingJob "submit" succeeded`, "pods ready 2/2", "run 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("mlp train submit's output lacks %q:\n%s", want, out)
		}
	}
	// The training's own progress (status.progress: "step N/20") appears
	// only where the operator publishes it (the progress endpoint).
	if strings.Contains(out, "step ") {
		t.Logf("training progress shown")
	} else {
		t.Logf("no training progress in the output: status.progress is not published by this operator build")
	}
	tj := &trainingv1alpha1.TrainingJob{}
	tj.Namespace, tj.Name = ns, "submit"
	e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", time.Minute)
}

// TestTrainLogsFollowsBothRanks: `mlp train logs -f`, started while the
// job runs, streams both ranks' lines as they are written, each prefixed
// with its rank, and ends by itself when the training ends.
func TestTrainLogsFollowsBothRanks(t *testing.T) {
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-cli-logs")
	if out, code := mlp(t, time.Minute, ns, submitArgs(t, "logs", 60, "0.5", "--no-wait")...); code != 0 {
		t.Fatalf("mlp train submit --no-wait exited %d:\n%s", code, out)
	}
	tj := &trainingv1alpha1.TrainingJob{}
	tj.Namespace, tj.Name = ns, "logs"
	// Both ranks train before the logs are followed: what follows was
	// written after the command started.
	steps.Until(t, "both ranks to train", trainTimeout, func(ctx context.Context) (bool, error) {
		logs, err := e.RunLogs(ctx, tj, 1)
		n := 0
		for _, l := range logs {
			if strings.Contains(l, "step ") {
				n++
			}
		}
		return n == 2, err
	})

	ctx, cancel := context.WithTimeout(t.Context(), trainTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, mlpBin, "-n", ns, "train", "logs", "logs", "-f")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := collect(stdout)() // until the command closes its output
	err = cmd.Wait()
	if err != nil {
		t.Fatalf("mlp train logs -f: %v (did not end by itself with the training?)\n%s", err, strings.Join(got, "\n"))
	}
	for _, rank := range []string{"[rank 0]", "[rank 1]"} {
		var steps_, result bool
		for _, l := range got {
			steps_ = steps_ || strings.HasPrefix(l, rank+" step ")
			result = result || strings.HasPrefix(l, rank+" RESULT")
		}
		if !steps_ || !result {
			t.Errorf("mlp train logs -f: %s steps %v, final RESULT %v; output:\n%s", rank, steps_, result, strings.Join(got, "\n"))
		}
	}
}

// collect reads r's lines in the background; the returned function waits
// for the end of r (the command's exit, or its kill by the context) and
// returns them.
func collect(r io.Reader) func() []string {
	var (
		wg    sync.WaitGroup
		lines []string
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := bufio.NewScanner(r)
		for s.Scan() {
			lines = append(lines, s.Text())
		}
	}()
	return func() []string { wg.Wait(); return lines }
}
