package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// fakeLogs serves "<pod> line N" logs and records what was asked; the
// test control plane has no kubelet to serve real ones.
type fakeLogs struct {
	mu    sync.Mutex
	asked []string
}

func (f *fakeLogs) open(_ context.Context, _ *session, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
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
	ns := newNamespace(t)
	c := adminClient(t)
	if err := c.Create(context.Background(), trainingJob(ns, "job", 2)); err != nil {
		t.Fatal(err)
	}
	// The job finished, so the follow ends with the run's streams instead
	// of waiting for a next run.
	setJobStatus(t, c, ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Run, st.Phase = 2, trainingv1alpha1.PhaseSucceeded
		setCondition(st, commonv1alpha1.ConditionSucceeded, metav1.ConditionTrue, "Completed")
	})
	runPod(t, c, ns, "job", 2, "Worker", 0, true)
	runPod(t, c, ns, "job", 2, "Master", 0, true)
	runPod(t, c, ns, "job", 1, "Master", 0, false)
	runPod(t, c, ns, "other", 2, "Master", 0, true)

	logs := &fakeLogs{}
	withLogs := func(o *Options) { o.Logs = logs.open }
	r := cli(context.Background(), t, env.Config, ns, withLogs, "train", "logs", "job", "-f")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	sort.Strings(lines)
	want := "[rank 0] job-master-0-r2 line 1,[rank 0] job-master-0-r2 line 2,[rank 1] job-worker-0-r2 line 1,[rank 1] job-worker-0-r2 line 2"
	if strings.Join(lines, ",") != want {
		t.Errorf("all ranks:\n%s\nwant (any interleaving of whole lines) %s", r.out, want)
	}
	if got := strings.Join(logs.requests(), ","); got != "job-master-0-r2/pytorch follow=true previous=false,job-worker-0-r2/pytorch follow=true previous=false" {
		t.Errorf("log requests %s", got)
	}

	r = cli(context.Background(), t, env.Config, ns, withLogs, "train", "logs", "job", "--rank", "1", "--previous")
	if r.code != 0 || r.out != "job-worker-0-r2 line 1\njob-worker-0-r2 line 2\n" {
		t.Errorf("--rank 1: exit %d, out %q, stderr %q", r.code, r.out, r.err)
	}
	r = cli(context.Background(), t, env.Config, ns, withLogs, "train", "logs", "job", "--run", "1")
	if r.code != 0 || r.out != "[rank 0] job-master-0-r1 line 1\n[rank 0] job-master-0-r1 line 2\n" {
		t.Errorf("--run 1: exit %d, out %q, stderr %q", r.code, r.out, r.err)
	}
	for args, want := range map[string]string{
		"--rank 5": "has ranks 0 to 1, not 5",
		"--run 7":  "no pods of run 7 of TrainingJob \"job\" exist",
	} {
		r := cli(context.Background(), t, env.Config, ns, withLogs, append([]string{"train", "logs", "job"}, strings.Fields(args)...)...)
		if r.code != ExitFailed || !strings.Contains(r.err, want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", args, r.code, r.err, want)
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

// TestVersionPrintsClientAPIsAndOperators shows the client's version, which
// APIs the cluster serves and the operator Deployments a user may see; a
// user who may not list Deployments gets the rest and a sentence.
func TestVersionPrintsClientAPIsAndOperators(t *testing.T) {
	ns := newNamespace(t)
	labels := map[string]string{labelPartOf: "ml-platform", labelName: "trainingjob-operator", labelVersion: "0.1.0"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mlp-trainingjob-operator", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "trainingjob-operator:0.1.0"}}},
			},
		},
	}
	if err := adminClient(t).Create(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	r := run(t, ns, "version")
	for _, want := range []string{
		"Client: mlp v0.0.0-test\n",
		"API training.mlplatform.dev/v1alpha1 (TrainingJob operator): served\n",
		"API notebooks.mlplatform.dev/v1alpha1 (Notebook operator): served\n",
		"trainingjob-operator  " + ns + "  0.1.0    0/1    trainingjob-operator:0.1.0\n",
	} {
		if r.code != 0 || !strings.Contains(r.out, want) {
			t.Errorf("exit %d, output lacks %q:\n%s%s", r.code, want, r.out, r.err)
		}
	}
	cfg, err := env.AddUser("erin", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	r = cli(context.Background(), t, cfg, ns, nil, "version")
	if r.code != 0 || !strings.Contains(r.out, "API features.mlplatform.dev/v1alpha1 (FeatureStore operator): served") ||
		!strings.Contains(r.out, `Operators: not visible to you (permission denied: you may not list deployments`) {
		t.Errorf("as a tenant: exit %d, out:\n%s%s", r.code, r.out, r.err)
	}
}

// TestTrainLogsSinceTimestampsTail passes kubectl's --since, --since-time,
// --timestamps and --tail on to the kubelet, and refuses them together or
// malformed as kubectl does.
func TestTrainLogsSinceTimestampsTail(t *testing.T) {
	ns := newNamespace(t)
	c := adminClient(t)
	if err := c.Create(context.Background(), trainingJob(ns, "job", 1)); err != nil {
		t.Fatal(err)
	}
	setJobStatus(t, c, ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) { st.Run, st.Phase = 1, trainingv1alpha1.PhaseRunning })
	runPod(t, c, ns, "job", 1, "Master", 0, true)

	var got []corev1.PodLogOptions
	record := func(o *Options) {
		o.Logs = func(_ context.Context, _ *session, _ *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
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
			r := cli(context.Background(), t, env.Config, ns, record, append([]string{"train", "logs", "job"}, tc.args...)...)
			if r.code != 0 || len(got) != 1 || !tc.check(got[0]) {
				t.Errorf("exit %d, stderr %q, log options %+v", r.code, r.err, got)
			}
		})
	}
	for args, wantErr := range map[string]string{
		"--since 1m --since-time 2026-11-26T13:00:00Z": "--since and --since-time cannot be used together",
		"--since-time yesterday":                       `--since-time "yesterday" is not an RFC3339 time`,
		"--since -1s":                                  "--since must not be negative",
	} {
		r := run(t, ns, append([]string{"train", "logs", "job"}, strings.Fields(args)...)...)
		if r.code != ExitFailed || !strings.Contains(r.err, wantErr) {
			t.Errorf("%s: exit %d, stderr %q, want %q", args, r.code, r.err, wantErr)
		}
	}
}
