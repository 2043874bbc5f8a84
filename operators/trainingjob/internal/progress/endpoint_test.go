package progress_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

const goodReport = `{"step":5,"totalSteps":20,"epoch":1,"metrics":{"loss":0.5}}`

// TestReportIsAuthorizedByThePodBehindTheToken: only rank 0 of the
// TrainingJob that owns the token's pod may report for it; every refusal
// is a JSON error with a reason, and nothing refused reaches status.
func TestReportIsAuthorizedByThePodBehindTheToken(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-auth")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, nil)

	a, b := newJob(t, c, ns, "job-a"), newJob(t, c, ns, "job-b")
	rank0A := a.pod(t, c, cs, "job-a-r1-0", progress.Audience, rank(0), nil)
	rank1A := a.pod(t, c, cs, "job-a-r1-1", progress.Audience, rank(1), nil)
	otherAudience := a.pod(t, c, cs, "job-a-r1-x", "https://kubernetes.default.svc", rank(0), nil)

	for name, tc := range map[string]struct {
		job, token string
		wantCode   int
		wantMsg    string
	}{
		"no token":                      {job: "job-a", wantCode: 401, wantMsg: "missing bearer token"},
		"garbage token":                 {job: "job-a", token: "not-a-token", wantCode: 401, wantMsg: "not valid for audience"},
		"token of another audience":     {job: "job-a", token: otherAudience, wantCode: 401, wantMsg: "not valid for audience"},
		"pod of job A reporting for B":  {job: "job-b", token: rank0A, wantCode: 403, wantMsg: "belongs to TrainingJob job-a, not job-b"},
		"rank 1 of job A":               {job: "job-a", token: rank1A, wantCode: 403, wantMsg: "not rank 0"},
		"rank 0 of A for a missing job": {job: "job-z", token: rank0A, wantCode: 403, wantMsg: "not job-z"},
		"rank 0 of A for A in other ns": {job: "job-a", token: rank0A, wantCode: 403, wantMsg: "namespace"},
	} {
		t.Run(name, func(t *testing.T) {
			target := ns
			if strings.Contains(name, "other ns") {
				target = "default"
			}
			code, body, _ := ep.post(t, target, tc.job, tc.token, goodReport)
			if code != tc.wantCode || !strings.Contains(errorMessage(t, body), tc.wantMsg) {
				t.Errorf("got %d %s, want %d with %q", code, body, tc.wantCode, tc.wantMsg)
			}
		})
	}
	testenv.Consistently(t, "no progress written for refused reports", 3*time.Second, func(ctx context.Context) error {
		for _, f := range []*fixture{a, b} {
			if p, err := progressOf(ctx, c, f); err != nil || p != nil {
				return fmt.Errorf("%s: progress %+v, error %w", f.tj.Name, p, err)
			}
		}
		return nil
	})

	code, body, _ := ep.post(t, ns, "job-a", rank0A, goodReport)
	if code != 202 {
		t.Fatalf("rank 0 of job A: %d %s", code, body)
	}
	got := waitStep(t, c, a, 5)
	if got.TotalSteps != 20 || got.Percent == nil || *got.Percent != 25 || got.Metrics["loss"] != "0.5" || got.Epoch != 1 {
		t.Errorf("status.progress = %+v", got)
	}
	if p, err := progressOf(t.Context(), c, b); err != nil || p != nil {
		t.Errorf("job B got progress %+v (%v)", p, err)
	}
}

// TestKubeflowRankZeroReports: on the Kubeflow backend rank 0 is the
// first Master (or Chief); a PaddleJob has Workers only and its worker 0
// (the rendezvous point) is rank 0; an MPIJob's Launcher, which
// training-operator v1 labels with no replica index, runs world rank 0.
// Every other pod is refused.
func TestKubeflowRankZeroReports(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-kf")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, nil)

	// A negative index is no replica-index label.
	type pod struct {
		role  string
		index int
	}
	cases := map[string]struct {
		job            client.Object
		rank0, refused pod
	}{
		"pytorch": {
			job:   &kubeflowv1.PyTorchJob{Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}}},
			rank0: pod{"master", 0}, refused: pod{"worker", 0},
		},
		"paddle": {
			job:   &kubeflowv1.PaddleJob{Spec: kubeflowv1.PaddleJobSpec{PaddleReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}}},
			rank0: pod{"worker", 0}, refused: pod{"worker", 1},
		},
		"mpi": {
			job:   &kubeflowv1.MPIJob{Spec: kubeflowv1.MPIJobSpec{MPIReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}}},
			rank0: pod{"launcher", -1}, refused: pod{"worker", 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newJob(t, c, ns, name)
			tc.job.SetNamespace(ns)
			tc.job.SetName(name + "-r1")
			tc.job.SetLabels(map[string]string{commonv1alpha1.LabelManagedBy: operatorName})
			if err := ctrl.SetControllerReference(f.tj, tc.job, scheme); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(t.Context(), tc.job); err != nil {
				t.Fatal(err)
			}
			f.run = tc.job
			token := func(p pod) string {
				labels := map[string]string{"training.kubeflow.org/replica-type": p.role}
				if p.index >= 0 {
					labels["training.kubeflow.org/replica-index"] = strconv.Itoa(p.index)
				}
				return f.pod(t, c, cs, strings.TrimSuffix(fmt.Sprintf("%s-r1-%s-%d", name, p.role, p.index), "--1"), progress.Audience, nil, labels)
			}
			if code, body, _ := ep.post(t, ns, name, token(tc.refused), goodReport); code != 403 || !strings.Contains(body, "not rank 0") {
				t.Errorf("%s %d: %d %s, want 403 not rank 0", tc.refused.role, tc.refused.index, code, body)
			}
			if code, body, _ := ep.post(t, ns, name, token(tc.rank0), goodReport); code != 202 {
				t.Fatalf("%s %d: %d %s", tc.rank0.role, tc.rank0.index, code, body)
			}
			waitStep(t, c, f, 5)
		})
	}
}

// TestBadReportsAreRefusedWithAReason: the JSON errors name what is wrong.
func TestBadReportsAreRefusedWithAReason(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-bad")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, nil)
	f := newJob(t, c, ns, "bad")
	token := f.pod(t, c, cs, "bad-r1-0", progress.Audience, rank(0), nil)

	for body, want := range map[string]string{
		`{"step":`:                            "not a JSON report",
		`{"step":30,"totalSteps":20}`:         "past totalSteps",
		`{"step":-3}`:                         "step must be between 0",
		`{"step":1,"metrics":{"loss":1e400}}`: "not a JSON report",
		`{"step":1,"metrics":{"a b":1}}`:      "metric name",
		`{"step":1,"gpu":"all"}`:              "unknown field",
		`{"step":5,"totalSteps":20,"step":6}`: `key "step" appears more than once`,
		`{"step":1,"metrics":{"x":"` + strings.Repeat("y", 5000) + `"}}`: "at most 4096 bytes",
	} {
		code, got, _ := ep.post(t, ns, "bad", token, body)
		wantCode := 400
		if strings.Contains(want, "bytes") {
			wantCode = 413
		}
		if code != wantCode || !strings.Contains(errorMessage(t, got), want) {
			t.Errorf("body %.40q: got %d %s, want %d with %q", body, code, got, wantCode, want)
		}
	}
	testenv.Consistently(t, "no progress written for invalid reports", 3*time.Second, func(ctx context.Context) error {
		if p, err := progressOf(ctx, c, f); err != nil || p != nil {
			return fmt.Errorf("progress %+v, error %w", p, err)
		}
		return nil
	})
}

// TestReportsBeyondTheRateGet429: a burst beyond the job's bucket is
// refused with Retry-After, while another job's reports still pass.
func TestReportsBeyondTheRateGet429(t *testing.T) {
	c, cs := admin(t)
	ns := testenv.CreateNamespace(t, c, "progress-rate")
	secret, pool := certSecret(t)
	ep := startOperator(t, secret, pool, func(o *progress.Options, _ *manager.Config) { o.Rate, o.Burst = 0.01, 3 })
	f, g := newJob(t, c, ns, "chatty"), newJob(t, c, ns, "quiet")
	chatty := f.pod(t, c, cs, "chatty-r1-0", progress.Audience, rank(0), nil)
	quiet := g.pod(t, c, cs, "quiet-r1-0", progress.Audience, rank(0), nil)

	var codes []int
	var retryAfter string
	for i := range 5 {
		code, _, ra := ep.post(t, ns, "chatty", chatty, fmt.Sprintf(`{"step":%d}`, i))
		codes = append(codes, code)
		if code == 429 {
			retryAfter = ra
		}
	}
	if fmt.Sprint(codes) != "[202 202 202 429 429]" {
		t.Errorf("codes of 5 reports with a burst of 3: %v", codes)
	}
	if secs, err := strconv.Atoi(retryAfter); err != nil || secs < 1 || secs > 101 {
		t.Errorf("Retry-After = %q, want the seconds until a token (about 100)", retryAfter)
	}
	if code, body, _ := ep.post(t, ns, "quiet", quiet, `{"step":1}`); code != 202 {
		t.Errorf("another job is limited by the first one's bucket: %d %s", code, body)
	}
}
