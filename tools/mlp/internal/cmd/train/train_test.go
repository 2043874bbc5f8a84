package train

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

func setCondition(st *trainingv1alpha1.TrainingJobStatus, typ string, status metav1.ConditionStatus, reason string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason})
}

// runPod creates a pod of a run as the backend would, with Kubeflow's
// replica labels, and marks it Ready when ready is true.
func runPod(t *testing.T, c client.Client, ns, job string, run int, role string, index int, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: job + "-" + strings.ToLower(role) + "-" + strconv.Itoa(index) + "-r" + strconv.Itoa(run),
			Labels: map[string]string{
				trainingv1alpha1.LabelJobName: job, trainingv1alpha1.LabelRun: strconv.Itoa(run),
				labelReplicaType: strings.ToLower(role), labelReplicaIndex: strconv.Itoa(index),
			},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "example.test/train:1"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if ready {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	return pod
}

func TestTrainListAndGetPrintEveryFormat(t *testing.T) {
	c := clitest.AdminClient(t)
	ns := clitest.NewNamespace(t)
	ctx := context.Background()
	for _, tj := range []*trainingv1alpha1.TrainingJob{clitest.TrainingJob(ns, "bert", 2), clitest.TrainingJob(ns, "mnist", 1)} {
		if err := c.Create(ctx, tj); err != nil {
			t.Fatal(err)
		}
	}
	clitest.SetJobStatus(t, c, ns, "bert", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase, st.Run, st.RestartCount = trainingv1alpha1.PhaseRunning, 2, 1
		st.Progress = &trainingv1alpha1.TrainingProgress{
			Step: 50, TotalSteps: 200, Percent: ptr.To[int32](25), Metrics: map[string]string{"loss": "0.42"},
			LastReportTime: metav1.Now(),
		}
	})
	clitest.SetJobStatus(t, c, ns, "mnist", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase, st.Run, st.Duration = trainingv1alpha1.PhaseFailed, 1, "3m2s"
		st.Failure = &trainingv1alpha1.Failure{Reason: "JobFailed", Cause: "OOMKilled", Class: trainingv1alpha1.FailureClassUser}
	})

	// The tables are the API server's, whose ages follow its clock.
	for name, tc := range map[string]struct {
		args  []string
		table bool
	}{
		"train-list-table": {args: []string{"train", "list"}, table: true},
		"train-list-wide":  {args: []string{"train", "list", "-o", "wide"}, table: true},
		"train-get-table":  {args: []string{"train", "get", "mnist", "bert"}, table: true},
		"train-list-json":  {args: []string{"train", "list", "-o", "json"}},
		"train-get-yaml":   {args: []string{"train", "get", "bert", "-o", "yaml"}},
		"train-get-name":   {args: []string{"train", "get", "bert", "mnist", "-o", "name"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, tc.args...)
			if r.Code != 0 || r.Err != "" {
				t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
			}
			out := clitest.Normalize(r.Out, ns)
			if tc.table {
				out = clitest.NormalizeTable(out, "AGE")
			}
			clitest.Golden(t, name, out)
		})
	}
}

func TestTrainErrors(t *testing.T) {
	ns := clitest.NewNamespace(t)
	for name, tc := range map[string]struct {
		args    []string
		wantErr []string
	}{
		"not found": {
			args:    []string{"train", "get", "nope"},
			wantErr: []string{`error: TrainingJob "nope" not found in namespace "` + ns + `"`},
		},
		"missing namespace, in the server's words": {
			args:    []string{"train", "submit", "mnist", "--image", "x", "--no-wait", "-n", ns + "-missing"},
			wantErr: []string{`error: namespaces "` + ns + `-missing" not found` + "\n"},
		},
		"CEL message of the server, one per line": {
			args: []string{"train", "submit", "boost", "--framework", "xgboost", "--workers", "1", "--image", "x", "--no-wait"},
			wantErr: []string{
				`error: TrainingJob "boost" is invalid:`,
				"\n  * spec: framework xgboost needs workers of at least 2 (one master and at least one worker)",
			},
		},
		"CEL message on server dry run": {
			args:    []string{"train", "submit", "Bad_Name", "--image", "x", "--dry-run=server", "-o", "yaml"},
			wantErr: []string{"metadata.name must start with a letter"},
		},
		"unknown output format": {
			args:    []string{"train", "list", "-o", "xml"},
			wantErr: []string{`unknown output format "xml"`},
		},
		"-f with shaping flags": {
			args:    []string{"train", "submit", "-f", "job.yaml", "--image", "y"},
			wantErr: []string{"-f cannot be combined with --image"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, tc.args...)
			if r.Code != util.ExitFailed {
				t.Errorf("exit code %d, want %d", r.Code, util.ExitFailed)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(r.Err, w) {
					t.Errorf("stderr %q does not contain %q", r.Err, w)
				}
			}
			if strings.Contains(r.Err, `Invalid value: "object"`) {
				t.Errorf("stderr keeps Go's error wrapping: %q", r.Err)
			}
		})
	}
	var list trainingv1alpha1.TrainingJobList
	if err := clitest.AdminClient(t).List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("rejected submissions left %d TrainingJobs (err %v)", len(list.Items), err)
	}
}

func TestTrainDeniedByRBACNamesVerbAndResource(t *testing.T) {
	ns := clitest.NewNamespace(t)
	cfg, err := clitest.Env.AddUser("carol")
	if err != nil {
		t.Fatal(err)
	}
	r := clitest.CLI(context.Background(), t, cfg, ns, nil, "train", "list")
	if r.Code != util.ExitFailed {
		t.Errorf("exit code %d, want 1", r.Code)
	}
	for _, want := range []string{
		"permission denied: you may not list trainingjobs.training.mlplatform.dev in namespace",
		`User "carol" cannot list resource "trainingjobs" in API group "training.mlplatform.dev"`,
		"ask your platform team",
	} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("stderr %q does not contain %q", r.Err, want)
		}
	}
	r = clitest.CLI(context.Background(), t, cfg, ns, nil, "train", "submit", "x", "--image", "i", "--no-wait")
	if !strings.Contains(r.Err, `cannot create resource "trainingjobs"`) || r.Code != util.ExitFailed {
		t.Errorf("submit without rights: exit %d, stderr %q", r.Code, r.Err)
	}
}

func TestTrainSuspendResumeDelete(t *testing.T) {
	c := clitest.AdminClient(t)
	ns := clitest.NewNamespace(t)
	ctx := context.Background()
	if err := c.Create(ctx, clitest.TrainingJob(ns, "job", 1)); err != nil {
		t.Fatal(err)
	}
	get := func() *trainingv1alpha1.TrainingJob {
		var tj trainingv1alpha1.TrainingJob
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "job"}, &tj); err != nil {
			t.Fatal(err)
		}
		return &tj
	}
	if r := clitest.Run(t, ns, "train", "suspend", "job"); r.Code != 0 || !get().Spec.Suspend {
		t.Fatalf("suspend: exit %d stderr %q, spec.suspend %v", r.Code, r.Err, get().Spec.Suspend)
	}
	if r := clitest.Run(t, ns, "train", "resume", "job"); r.Code != 0 || get().Spec.Suspend {
		t.Fatalf("resume: exit %d stderr %q, spec.suspend %v", r.Code, r.Err, get().Spec.Suspend)
	}
	r := clitest.Run(t, ns, "train", "delete", "job")
	if r.Code != 0 || r.Out != "trainingjob.training.mlplatform.dev \"job\" deleted\n" {
		t.Fatalf("delete: exit %d, out %q, err %q", r.Code, r.Out, r.Err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "job"}, &trainingv1alpha1.TrainingJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete: %v, want NotFound", err)
	}
	if r := clitest.Run(t, ns, "train", "suspend", "job"); r.Code != util.ExitFailed || !strings.Contains(r.Err, `TrainingJob "job" not found`) {
		t.Errorf("suspend of a deleted job: exit %d, stderr %q", r.Code, r.Err)
	}
}

// TestTrainDescribe shows conditions, progress, failure, ranked pods and
// events of a job, all read from the apiserver.
func TestTrainDescribe(t *testing.T) {
	c := clitest.AdminClient(t)
	ns := clitest.NewNamespace(t)
	ctx := context.Background()
	if err := c.Create(ctx, clitest.TrainingJob(ns, "bert", 2)); err != nil {
		t.Fatal(err)
	}
	clitest.SetJobStatus(t, c, ns, "bert", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase, st.Run = trainingv1alpha1.PhaseRunning, 1
		setCondition(st, trainingv1alpha1.ConditionRunning, metav1.ConditionTrue, "Running")
		st.Progress = &trainingv1alpha1.TrainingProgress{Step: 10, TotalSteps: 100, Percent: ptr.To[int32](10), LastReportTime: metav1.Now()}
	})
	runPod(t, c, ns, "bert", 1, "Worker", 0, false)
	runPod(t, c, ns, "bert", 1, "Master", 0, true)
	r := clitest.Run(t, ns, "train", "describe", "bert")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	for _, want := range []string{
		"Status:       Running", "Progress:     step 10/100 (10%)", "Running  True    Running",
		"0     bert-master-0-r1  Running  true   0", "1     bert-worker-0-r1  Pending  false  0", "Events:\n  <none>",
	} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("describe output lacks %q:\n%s", want, r.Out)
		}
	}
}

// TestTrainDescribeShowsOnlyThisJobsEvents: after a job is deleted and
// submitted again under its name, describe shows the events of the new
// job, not the old one's, which the API server keeps for an hour.
func TestTrainDescribeShowsOnlyThisJobsEvents(t *testing.T) {
	c := clitest.AdminClient(t)
	ns := clitest.NewNamespace(t)
	ctx := context.Background()
	clitest.CreateAll(t, clitest.TrainingJob(ns, "bert", 1))
	if err := warningEvent(ns, "bert", "OldJobFailed", "the deleted job's warning")(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, clitest.TrainingJob(ns, "bert", 1)); err != nil {
		t.Fatal(err)
	}
	clitest.CreateAll(t, clitest.TrainingJob(ns, "bert", 1))
	if err := warningEvent(ns, "bert", "NewJobWarned", "the new job's warning")(ctx, c); err != nil {
		t.Fatal(err)
	}
	r := clitest.Run(t, ns, "train", "describe", "bert")
	if r.Code != 0 || !strings.Contains(r.Out, "NewJobWarned") || strings.Contains(r.Out, "OldJobFailed") {
		t.Errorf("exit %d, stderr %q; want the new job's event only:\n%s", r.Code, r.Err, r.Out)
	}
}

// TestTrainDescribeWithoutPodRights: a user who may read TrainingJobs but
// not pods (nor events) gets the job described, with a note in place of
// each part that was refused, in the server's words.
func TestTrainDescribeWithoutPodRights(t *testing.T) {
	c := clitest.AdminClient(t)
	ns := clitest.NewNamespace(t)
	clitest.CreateAll(t, clitest.TrainingJob(ns, "bert", 1))
	clitest.SetJobStatus(t, c, ns, "bert", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase, st.Run = trainingv1alpha1.PhaseRunning, 1
	})
	cfg := clitest.UserWithRules(t, ns, "heidi", clitest.Rule("training.mlplatform.dev", "trainingjobs", "get"))
	r := clitest.CLI(context.Background(), t, cfg, ns, nil, "train", "describe", "bert")
	if r.Code != 0 || r.Err != "" {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	if !regexp.MustCompile(`(?m)^Status: +Running$`).MatchString(r.Out) {
		t.Errorf("describe does not show the job's status:\n%s", r.Out)
	}
	for _, want := range []string{
		"Pods of the current run:\n  <not shown: permission denied: you may not list pods in namespace",
		`User "heidi" cannot list resource "pods"`,
		"Events:\n  <not shown: permission denied: you may not list events",
	} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("describe output lacks %q:\n%s", want, r.Out)
		}
	}
}

// TestTrainCompletionListsNames completes resource names from the cluster.
func TestTrainCompletionListsNames(t *testing.T) {
	c := clitest.AdminClient(t)
	ns := clitest.NewNamespace(t)
	for _, n := range []string{"alpha", "beta", "alps"} {
		if err := c.Create(context.Background(), clitest.TrainingJob(ns, n, 1)); err != nil {
			t.Fatal(err)
		}
	}
	r := clitest.Run(t, ns, "__complete", "train", "get", "al")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	if got := strings.Fields(r.Out); strings.Join(got[:2], " ") != "alpha alps" || got[2] != ":4" {
		t.Errorf("completion %q, want alpha alps and directive :4 (no file completion)", r.Out)
	}
}

// TestWaitWithoutPodRights follows a job for a user who may read
// TrainingJobs but not pods: the phase still shows and the outcome counts;
// a user who may not read the job gets the denial, not an endless wait.
func TestWaitWithoutPodRights(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	if err := c.Create(context.Background(), clitest.TrainingJob(ns, "job", 1)); err != nil {
		t.Fatal(err)
	}
	clitest.SetJobStatus(t, c, ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Run, st.Phase, st.Duration = 1, trainingv1alpha1.PhaseSucceeded, "1m0s"
		setCondition(st, "Succeeded", metav1.ConditionTrue, "Succeeded")
	})
	cfg := clitest.UserWithRules(t, ns, "frank", clitest.Rule("training.mlplatform.dev", "trainingjobs", "get"))
	// The deadline ends the wait should it ever hang on the denied pods.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := clitest.CLI(ctx, t, cfg, ns, nil, "train", "wait", "job")
	if r.Code != util.ExitOK || r.Out != "" || r.Err != "job: Succeeded, run 1, restarts 0\nTrainingJob \"job\" succeeded after 1m0s\n" {
		t.Errorf("exit %d, out %q, stderr %q", r.Code, r.Out, r.Err)
	}
	cfg, err := clitest.Env.AddUser("grace")
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	r = clitest.CLI(ctx2, t, cfg, ns, nil, "train", "wait", "job")
	if r.Code != util.ExitFailed || !strings.Contains(r.Err, `cannot get resource "trainingjobs"`) {
		t.Errorf("without rights: exit %d, stderr %q", r.Code, r.Err)
	}
}

// TestTrainShowsQueuePosition: a job waiting in a Kueue LocalQueue shows
// its place there in list (the Position column) and describe; one whose
// place is unknown shows its phase alone.
func TestTrainShowsQueuePosition(t *testing.T) {
	c := clitest.AdminClient(t)
	ns := clitest.NewNamespace(t)
	for _, name := range []string{"bert", "mnist"} {
		tj := clitest.TrainingJob(ns, name, 1)
		tj.Spec.QueueName = "team-queue"
		if err := c.Create(context.Background(), tj); err != nil {
			t.Fatal(err)
		}
	}
	clitest.SetJobStatus(t, c, ns, "bert", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase, st.Run = trainingv1alpha1.PhaseQueued, 1
		st.Queue = &commonv1alpha1.QueueStatus{LocalQueue: "team-queue", Position: ptr.To[int32](2)}
		setCondition(st, trainingv1alpha1.ConditionQueued, metav1.ConditionTrue, "Waiting")
	})
	clitest.SetJobStatus(t, c, ns, "mnist", func(st *trainingv1alpha1.TrainingJobStatus) {
		st.Phase, st.Run = trainingv1alpha1.PhaseQueued, 1
		st.Queue = &commonv1alpha1.QueueStatus{LocalQueue: "team-queue"}
		setCondition(st, trainingv1alpha1.ConditionQueued, metav1.ConditionTrue, "Waiting")
	})
	list := clitest.Run(t, ns, "train", "list")
	if list.Code != 0 {
		t.Fatalf("list: exit %d, stderr %q", list.Code, list.Err)
	}
	// The place is the CRD's Position printer column, next to the phase.
	rows := map[string]map[string]string{}
	for _, r := range clitest.TableRows(list.Out) {
		rows[r["NAME"]] = r
	}
	if bert := rows["bert"]; bert["STATUS"] != "Queued" || bert["POSITION"] != "2" {
		t.Errorf("list does not show bert's place in the queue:\n%s", list.Out)
	}
	if mnist := rows["mnist"]; mnist["STATUS"] != "Queued" || mnist["POSITION"] != "" {
		t.Errorf("list shows a place for mnist, whose place is unknown:\n%s", list.Out)
	}
	describe := clitest.Run(t, ns, "train", "describe", "bert")
	if describe.Code != 0 {
		t.Fatalf("describe: exit %d, stderr %q", describe.Code, describe.Err)
	}
	if !regexp.MustCompile(`(?m)^Status: +Queued \(position 2 in team-queue\)$`).MatchString(describe.Out) {
		t.Errorf("describe does not show the place in the queue:\n%s", describe.Out)
	}
}
