package train

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/follow"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
)

// defaultPodRunningTimeout bounds how long logs waits for a run's pods to
// start. kubectl logs waits 20s (--pod-running-timeout) for a pod of a
// running workload; a training's first pods often wait longer than that for
// a large image or for the quota a queue frees, so mlp waits longer.
const defaultPodRunningTimeout = 5 * time.Minute

// readJob reads the TrainingJob name.
func readJob(ctx context.Context, s *kube.Session, name string) (*trainingv1alpha1.TrainingJob, error) {
	u, err := s.Get(ctx, kube.TrainingJobKind, name)
	if err != nil {
		return nil, err
	}
	return kube.Typed[trainingv1alpha1.TrainingJob](u)
}

// waitForRun returns the run to read (pinned, else the job's current one)
// and its pods in rank order once they can serve logs. While the job has no
// run yet or the run's pods are missing or Pending, it says so on stderr and
// waits for the watches' news, at most --pod-running-timeout.
func (lo *logsOptions) waitForRun(ctx context.Context, s *kube.Session, name string, pinned int32, changed <-chan struct{}) (int32, []corev1.Pod, error) {
	var deadline <-chan time.Time
	if lo.podRunningTimeout > 0 {
		timer := time.NewTimer(lo.podRunningTimeout)
		defer timer.Stop()
		deadline = timer.C
	}
	said := ""
	for {
		tj, err := readJob(ctx, s, name)
		if err != nil {
			return 0, nil, err
		}
		run := pinned
		if run == 0 {
			run = tj.Status.Run
		}
		var pods []corev1.Pod
		if run > 0 {
			if pods, err = follow.RunPods(ctx, s, name, run); err != nil {
				return 0, nil, err
			}
		}
		why := runNotStarted(tj, pinned, run, pods)
		switch {
		case why == "" && len(pods) > 0:
			return run, rankedPods(pods), nil
		case why == "" && run == 0:
			return 0, nil, fmt.Errorf("TrainingJob %q has not started a run yet (status %s)", name, output.OrDash(string(tj.Status.Phase)))
		case why == "":
			return 0, nil, fmt.Errorf("no pods of run %d of TrainingJob %q exist (cleanPodPolicy may have deleted them, or they are not created yet)", run, name)
		}
		if why != said {
			fmt.Fprintf(lo.Streams.ErrOut, "Waiting%s for %s\n", upTo(lo.podRunningTimeout), escape.Line(why))
			said = why
		}
		select {
		case <-ctx.Done():
			return 0, nil, &util.ExitError{Code: util.ExitIncomplete, Err: fmt.Errorf("interrupted while waiting for %s", why)}
		case <-deadline:
			return 0, nil, &util.ExitError{Code: util.ExitIncomplete, Err: fmt.Errorf(
				"timed out after %s waiting for %s (--pod-running-timeout sets how long to wait)", lo.podRunningTimeout, why)}
		case <-changed:
		}
	}
}

func upTo(timeout time.Duration) string {
	if timeout <= 0 {
		return ""
	}
	return " up to " + timeout.String()
}

// runNotStarted says what the logs of run still wait for: the job's first
// run, the run's pods, or the pods still Pending; "" when nothing is worth
// waiting for: the pods can serve logs, or the job finished, or the user
// pinned a run other than the current one (an earlier run's pods will not
// start again, and a later run is not for now).
func runNotStarted(tj *trainingv1alpha1.TrainingJob, pinned, run int32, pods []corev1.Pod) string {
	if follow.Finished(tj) || (pinned != 0 && pinned != tj.Status.Run) {
		return ""
	}
	if run == 0 {
		return fmt.Sprintf("TrainingJob %q to start its first run (status %s)", tj.Name, output.OrDash(string(tj.Status.Phase)))
	}
	if len(pods) == 0 {
		return fmt.Sprintf("the pods of run %d of TrainingJob %q to be created", run, tj.Name)
	}
	waiting := 0
	for i := range pods {
		if pods[i].Status.Phase == corev1.PodPending || pods[i].Status.Phase == "" {
			waiting++
		}
	}
	if waiting == 0 {
		return ""
	}
	return fmt.Sprintf("the pods of run %d of TrainingJob %q to start (%d of %d pending)", run, tj.Name, waiting, len(pods))
}

// nextRun waits, for a follow, until the job starts the run after run and
// returns it; 0 when the job finished instead, and ctx's error when the user
// ended the follow.
func nextRun(ctx context.Context, s *kube.Session, name string, run int32, changed <-chan struct{}) (int32, error) {
	for {
		tj, err := readJob(ctx, s, name)
		if err != nil {
			return 0, err
		}
		if tj.Status.Run > run {
			return tj.Status.Run, nil
		}
		if follow.Finished(tj) {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-changed:
		}
	}
}
