package train

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// fakeLogs serves "<pod> line N" logs and records what was asked; the
// test control plane has no kubelet to serve real ones.
type fakeLogs struct {
	mu    sync.Mutex
	asked []string
}

func (f *fakeLogs) open(_ context.Context, _ *kube.Session, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	f.asked = append(f.asked, fmt.Sprintf("%s/%s follow=%t previous=%t", pod.Name, opts.Container, opts.Follow, opts.Previous))
	f.mu.Unlock()
	return io.NopCloser(strings.NewReader(fmt.Sprintf("%s line 1\n%s line 2\n", pod.Name, pod.Name))), nil
}

func (f *fakeLogs) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]string(nil), f.asked...)
	sort.Strings(out)
	return out
}

// TestTrainLogsRanks selects the pods of a run by our labels, orders them
// into ranks (Master first) and prefixes every line with its rank; --rank
// picks one, --run an earlier run, and pods of other jobs or runs are
// never read.
func TestTrainLogsRanks(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	if err := c.Create(context.Background(), clitest.TrainingJob(ns, "job", 2)); err != nil {
		t.Fatal(err)
	}
	// The job finished, so the follow ends with the run's streams instead
	// of waiting for a next run.
	clitest.SetJobStatus(t, c, ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Run, st.Phase = 2, trainingv1alpha1.PhaseSucceeded
		setCondition(st, commonv1alpha1.ConditionSucceeded, metav1.ConditionTrue, "Completed")
	})
	runPod(t, c, ns, "job", 2, "Worker", 0, true)
	runPod(t, c, ns, "job", 2, "Master", 0, true)
	runPod(t, c, ns, "job", 1, "Master", 0, false)
	runPod(t, c, ns, "other", 2, "Master", 0, true)

	logs := &fakeLogs{}
	withLogs := func(o *util.Options) { o.Logs = logs.open }
	r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, withLogs, "train", "logs", "job", "-f")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	lines := strings.Split(strings.TrimSpace(r.Out), "\n")
	sort.Strings(lines)
	want := "[rank 0] job-master-0-r2 line 1,[rank 0] job-master-0-r2 line 2,[rank 1] job-worker-0-r2 line 1,[rank 1] job-worker-0-r2 line 2"
	if strings.Join(lines, ",") != want {
		t.Errorf("all ranks:\n%s\nwant (any interleaving of whole lines) %s", r.Out, want)
	}
	if got := strings.Join(logs.requests(), ","); got != "job-master-0-r2/pytorch follow=true previous=false,job-worker-0-r2/pytorch follow=true previous=false" {
		t.Errorf("log requests %s", got)
	}

	r = clitest.CLI(context.Background(), t, clitest.Env.Config, ns, withLogs, "train", "logs", "job", "--rank", "1", "--previous")
	if r.Code != 0 || r.Out != "job-worker-0-r2 line 1\njob-worker-0-r2 line 2\n" {
		t.Errorf("--rank 1: exit %d, out %q, stderr %q", r.Code, r.Out, r.Err)
	}
	r = clitest.CLI(context.Background(), t, clitest.Env.Config, ns, withLogs, "train", "logs", "job", "--run", "1")
	if r.Code != 0 || r.Out != "[rank 0] job-master-0-r1 line 1\n[rank 0] job-master-0-r1 line 2\n" {
		t.Errorf("--run 1: exit %d, out %q, stderr %q", r.Code, r.Out, r.Err)
	}
	for args, want := range map[string]string{
		"--rank 5": "has ranks 0 to 1, not 5",
		"--run 7":  "no pods of run 7 of TrainingJob \"job\" exist",
	} {
		r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, withLogs, append([]string{"train", "logs", "job"}, strings.Fields(args)...)...)
		if r.Code != util.ExitFailed || !strings.Contains(r.Err, want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", args, r.Code, r.Err, want)
		}
	}
}

// TestRankedPodsNativeBackend orders pods of Indexed Jobs by completion
// index, the label the native backend's pods carry.
func TestRankedPodsNativeBackend(t *testing.T) {
	pod := func(name, index string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelCompletionIndex: index}}}
	}
	got := rankedPods([]corev1.Pod{pod("c", "2"), pod("a", "10"), pod("b", "0"), pod("d", "1")})
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if strings.Join(names, "") != "bdca" {
		t.Errorf("order %v, want b d c a (index 0, 1, 2, 10)", names)
	}
}

// TestTrainLogsSinceTimestampsTail passes kubectl's --since, --since-time,
// --timestamps and --tail on to the kubelet, and refuses them together or
// malformed as kubectl does.
func TestTrainLogsSinceTimestampsTail(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	if err := c.Create(context.Background(), clitest.TrainingJob(ns, "job", 1)); err != nil {
		t.Fatal(err)
	}
	clitest.SetJobStatus(t, c, ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) { st.Run, st.Phase = 1, trainingv1alpha1.PhaseRunning })
	runPod(t, c, ns, "job", 1, "Master", 0, true)

	var got []corev1.PodLogOptions
	record := func(o *util.Options) {
		o.Logs = func(_ context.Context, _ *kube.Session, _ *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
			got = append(got, *opts)
			return io.NopCloser(strings.NewReader("")), nil
		}
	}
	for name, tc := range map[string]struct {
		args  []string
		check func(o corev1.PodLogOptions) bool
	}{
		"since rounds up to whole seconds": {args: []string{"--since", "1500ms", "--timestamps"}, check: func(o corev1.PodLogOptions) bool {
			return o.SinceSeconds != nil && *o.SinceSeconds == 2 && o.Timestamps && o.SinceTime == nil && o.TailLines == nil
		}},
		"since-time and tail": {args: []string{"--since-time", "2026-11-26T13:00:00Z", "--tail", "5"}, check: func(o corev1.PodLogOptions) bool {
			return o.SinceTime != nil && o.SinceTime.UTC().Format(time.RFC3339) == "2026-11-26T13:00:00Z" && o.SinceSeconds == nil &&
				o.TailLines != nil && *o.TailLines == 5 && !o.Timestamps
		}},
	} {
		t.Run(name, func(t *testing.T) {
			got = nil
			r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, record, append([]string{"train", "logs", "job"}, tc.args...)...)
			if r.Code != 0 || len(got) != 1 || !tc.check(got[0]) {
				t.Errorf("exit %d, stderr %q, log options %+v", r.Code, r.Err, got)
			}
		})
	}
	for args, wantErr := range map[string]string{
		"--since 1m --since-time 2026-11-26T13:00:00Z": "--since and --since-time cannot be used together",
		"--since-time yesterday":                       `--since-time "yesterday" is not an RFC3339 time`,
		"--since -1s":                                  "--since must not be negative",
	} {
		r := clitest.Run(t, ns, append([]string{"train", "logs", "job"}, strings.Fields(args)...)...)
		if r.Code != util.ExitFailed || !strings.Contains(r.Err, wantErr) {
			t.Errorf("%s: exit %d, stderr %q, want %q", args, r.Code, r.Err, wantErr)
		}
	}
}
