package train

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// kubeletLogs serves "<pod> line 1" as the kubelet would: only for a pod
// whose containers started, refusing a Pending one as the API does.
func kubeletLogs(_ context.Context, _ *kube.Session, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	if pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "" {
		return nil, fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", opts.Container, pod.Name)
	}
	return io.NopCloser(strings.NewReader(pod.Name + " line 1\n")), nil
}

func podRunning(ns, name string) func(context.Context, client.Client) error {
	return func(ctx context.Context, c client.Client) error {
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodRunning
		return c.Status().Update(ctx, pod)
	}
}

// TestTrainLogsWaitsForPendingPodsAndFollowsTheNextRun: logs -f of a job
// whose pods are Pending says that it waits, and for how long at most,
// instead of failing; it prints the run's logs once the pods run, goes on
// into the next run after a restart, and ends when the job finished.
func TestTrainLogsWaitsForPendingPodsAndFollowsTheNextRun(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	if err := c.Create(context.Background(), clitest.TrainingJob(ns, "job", 1)); err != nil {
		t.Fatal(err)
	}
	clitest.SetJobStatus(t, c, ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) { st.Run, st.Phase = 1, trainingv1alpha1.PhasePending })
	runPod(t, c, ns, "job", 1, "Master", 0, false)

	out := &clitest.SyncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	opErr := make(chan error, 1)
	go func() {
		opErr <- fakeOperator(ctx, c, out, []step{
			{do: noop, expect: `Waiting up to 5m0s for the pods of run 1 of TrainingJob "job" to start (1 of 1 pending)` + "\n"},
			{do: podRunning(ns, "job-master-0-r1"), expect: "[rank 0] job-master-0-r1 line 1\n"},
			{do: jobStatus(ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) { st.Run, st.Phase = 2, trainingv1alpha1.PhaseRestarting }),
				expect: `TrainingJob "job" started run 2; following its pods` + "\n" +
					`Waiting up to 5m0s for the pods of run 2 of TrainingJob "job" to be created` + "\n"},
			{do: func(ctx context.Context, c client.Client) error {
				runPod(t, c, ns, "job", 2, "Master", 0, true)
				return nil
			}, expect: "[rank 0] job-master-0-r2 line 1\n"},
			{do: jobStatus(ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
				st.Phase = trainingv1alpha1.PhaseSucceeded
				setCondition(st, commonv1alpha1.ConditionSucceeded, metav1.ConditionTrue, "Completed")
			})},
		})
	}()
	r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) {
		o.Logs = kubeletLogs
		o.Streams.Out, o.Streams.ErrOut = io.MultiWriter(out, o.Streams.Out), io.MultiWriter(out, o.Streams.ErrOut)
	}, "train", "logs", "job", "-f")
	if err := <-opErr; err != nil {
		t.Fatalf("%v (exit %d, stderr %q)", err, r.Code, r.Err)
	}
	if r.Code != 0 || r.Out != "[rank 0] job-master-0-r1 line 1\n[rank 0] job-master-0-r2 line 1\n" {
		t.Errorf("exit %d, out %q, stderr %q; want exit 0 when the job finished, with both runs' lines", r.Code, r.Out, r.Err)
	}
}

func noop(context.Context, client.Client) error { return nil }

// TestTrainLogsWaitIsBounded: the wait for a run's pods, or for the job's
// first run, ends after --pod-running-timeout with exit 2 and says what it
// waited for.
func TestTrainLogsWaitIsBounded(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	for _, name := range []string{"pending", "queued"} {
		if err := c.Create(context.Background(), clitest.TrainingJob(ns, name, 1)); err != nil {
			t.Fatal(err)
		}
	}
	clitest.SetJobStatus(t, c, ns, "pending", func(st *trainingv1alpha1.TrainingJobStatus) { st.Run, st.Phase = 1, trainingv1alpha1.PhasePending })
	runPod(t, c, ns, "pending", 1, "Master", 0, false)
	clitest.SetJobStatus(t, c, ns, "queued", func(st *trainingv1alpha1.TrainingJobStatus) { st.Phase = trainingv1alpha1.PhaseQueued })

	for name, want := range map[string]string{
		"pending": `the pods of run 1 of TrainingJob "pending" to start (1 of 1 pending)`,
		"queued":  `TrainingJob "queued" to start its first run (status Queued)`,
	} {
		t.Run(name, func(t *testing.T) {
			withLogs := func(o *util.Options) { o.Logs = kubeletLogs }
			r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, withLogs, "train", "logs", name, "--pod-running-timeout", "1s")
			wantErr := "Waiting up to 1s for " + want + "\n" +
				"error: timed out after 1s waiting for " + want + " (--pod-running-timeout sets how long to wait)\n"
			if r.Code != util.ExitIncomplete || r.Err != wantErr || r.Out != "" {
				t.Errorf("exit %d, out %q, stderr:\n%s\nwant exit %d, stderr:\n%s", r.Code, r.Out, r.Err, util.ExitIncomplete, wantErr)
			}
		})
	}
}
