package trainingjob

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/failure"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// TestNativeFailedPodSeenAfterTheJobStillExplainsTheRun: the operator's
// watches of Jobs and of pods need not agree on their order, and the
// Job's failure may reach its cache before the failed pod that caused it
// (the CI flake of TestNativeCleanPodPolicy at 30af2c8). The run is then
// not explained from the Job alone: its record waits for the pod, which
// gives the failure's class and exit code and so the restart decision.
// The grace is long here so that the test's own pace never decides.
func TestNativeFailedPodSeenAfterTheJobStillExplainsTheRun(t *testing.T) {
	c := adminClient(t)
	op := startOperator(t, func(r *Reconciler) { r.FailedPodsGrace = time.Minute })
	cases := map[string]struct {
		fail      func(*corev1.Pod)
		wantClass trainingv1alpha1.FailureClass
		wantCause string
		restarted bool
	}{
		"a user error ends the job": {
			fail: func(pod *corev1.Pod) {
				setPodStatus(t, c, pod, func(s *corev1.PodStatus) {
					s.Phase = corev1.PodFailed
					s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "ValueError: bad learning rate", FinishedAt: metav1.Now()}}
				})
			},
			wantClass: trainingv1alpha1.FailureClassUser, wantCause: failure.CauseError,
		},
		"a preemption starts the next run": {
			fail:      func(pod *corev1.Pod) { disrupt(t, c, pod, corev1.PodReasonPreemptionByScheduler) },
			wantClass: trainingv1alpha1.FailureClassInfrastructure, wantCause: failure.CausePreempted, restarted: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := createNamespace(t, c)
			tj := native(checkpointed(ns, "late", 1, 3, 0))
			job := createRun(t, c, tj)
			pods := runRanks(t, c, job)
			// The Job controller failed the Job for a pod whose failure
			// the operator's cache has not seen: there the pod still runs.
			failBatchJob(t, c, job)
			settle(t, c, op, ns, job)
			early, err := getTJ(t.Context(), c, tj)
			if err != nil {
				t.Fatal(err)
			}
			if len(early.Status.Runs) != 0 || early.Status.Run > 1 || conditions.IsTrue(early, commonv1alpha1.ConditionFailed) {
				t.Fatalf("the run was recorded before its failed pod was seen: run %d runs %+v failure %+v", early.Status.Run, early.Status.Runs, early.Status.Failure)
			}

			tc.fail(pods[0])
			got := waitTJ(t, c, tj, "run 1 recorded", func(tj *trainingv1alpha1.TrainingJob) bool { return len(tj.Status.Runs) == 1 })
			rec := got.Status.Runs[0]
			if rec.Class != tc.wantClass || rec.Reason != tc.wantCause {
				t.Errorf("run 1 recorded as %s/%s (%s), want %s/%s", rec.Class, rec.Reason, rec.Message, tc.wantClass, tc.wantCause)
			}
			if tc.restarted {
				if got.Status.Run != 2 || got.Status.RestartCount != 1 {
					t.Errorf("run %d restarts %d, want run 2 after one restart", got.Status.Run, got.Status.RestartCount)
				}
				waitBatchJob(t, c, ns, "late-r2")
				return
			}
			if f := got.Status.Failure; f == nil || f.ExitCode != 1 || f.Pod != pods[0].Name || f.TerminationMessage != "ValueError: bad learning rate" {
				t.Errorf("failure %+v, want the pod's exit code and message", got.Status.Failure)
			}
			if got.Status.Run != 1 || got.Status.RestartCount != 0 {
				t.Errorf("run %d restarts %d, want 1 0", got.Status.Run, got.Status.RestartCount)
			}
		})
	}
}

// TestNativeFailedJobWhosePodNeverShowsIsExplainedAfterTheGrace: a failed
// pod deleted before the operator saw it fail never reaches the cache.
// The job waits for it no longer than FailedPodsGrace after the Job's
// failure, by the operator's clock, and is then explained from the Job
// alone.
func TestNativeFailedJobWhosePodNeverShowsIsExplainedAfterTheGrace(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	clk := &testClock{}
	op := startOperator(t, func(r *Reconciler) {
		r.Clock = clk
		r.FailedPodsGrace = time.Minute
	})

	tj := native(newTrainingJob(ns, "vanished", 1))
	job := createRun(t, c, tj)
	pods := runRanks(t, c, job)
	if err := c.Delete(t.Context(), pods[0], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	failBatchJob(t, c, job)
	settle(t, c, op, ns, job)
	early, err := getTJ(t.Context(), c, tj)
	if err != nil {
		t.Fatal(err)
	}
	if conditions.IsTrue(early, commonv1alpha1.ConditionFailed) || len(early.Status.Runs) != 0 {
		t.Fatalf("the failure was explained before the grace passed: runs %+v failure %+v", early.Status.Runs, early.Status.Failure)
	}

	clk.advance(time.Minute)
	poke(t, c, tj)
	got := waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	if f := got.Status.Failure; f == nil || f.Class != trainingv1alpha1.FailureClassUnknown || f.Reason != "BackoffLimitExceeded" || f.Pod != "" {
		t.Errorf("failure %+v, want the Job's reason and class Unknown", got.Status.Failure)
	}
	if n := len(got.Status.Runs); n != 1 || got.Status.Runs[0].Class != trainingv1alpha1.FailureClassUnknown {
		t.Errorf("runs %+v, want run 1 of class Unknown", got.Status.Runs)
	}
	if ct := got.Status.CompletionTime; ct == nil || !ct.Equal(ptr.To(job.Status.Conditions[0].LastTransitionTime)) {
		t.Errorf("completion time %v, want the Job's failure time", ct)
	}
}

// TestAFailedRunWaitsOnlyForFailedPodsTheCacheLacks: the failure waits
// while the child counts more failed pods than the cache holds, up to the
// grace after the child's failure time, and never otherwise.
func TestAFailedRunWaitsOnlyForFailedPodsTheCacheLacks(t *testing.T) {
	failedAt := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	pod := func(phase corev1.PodPhase, deleting bool) corev1.Pod {
		p := corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(failedAt))
		}
		return p
	}
	oneFailed := []trainingv1alpha1.RoleStatus{{Name: "pods", Failed: 1}}
	cases := map[string]struct {
		st    backend.RunState
		pods  []corev1.Pod
		grace time.Duration
		after time.Duration
		want  time.Duration
	}{
		"the failed pod is not cached yet": {
			st: backend.RunState{Roles: oneFailed}, pods: []corev1.Pod{pod(corev1.PodRunning, false)}, after: 2 * time.Second, want: 3 * time.Second,
		},
		"no pod of the run is cached": {
			st: backend.RunState{Roles: oneFailed}, after: time.Second, want: 4 * time.Second,
		},
		"the failed pod is cached": {
			st: backend.RunState{Roles: oneFailed}, pods: []corev1.Pod{pod(corev1.PodFailed, false), pod(corev1.PodRunning, true)}, after: time.Second,
		},
		"a pod being deleted counts as failed": {
			st: backend.RunState{Roles: oneFailed}, pods: []corev1.Pod{pod(corev1.PodRunning, true)}, after: time.Second,
		},
		"a pod that succeeded while deleted does not": {
			st: backend.RunState{Roles: oneFailed}, pods: []corev1.Pod{pod(corev1.PodSucceeded, true)}, after: time.Second, want: 4 * time.Second,
		},
		"the grace has passed": {
			st: backend.RunState{Roles: oneFailed}, after: 5 * time.Second,
		},
		"the child's clock runs an hour ahead": {
			st: backend.RunState{Roles: oneFailed}, after: -time.Hour, want: 5 * time.Second,
		},
		"a longer grace": {
			st: backend.RunState{Roles: oneFailed}, grace: time.Minute, after: 5 * time.Second, want: 55 * time.Second,
		},
		"Kubeflow's roles add up": {
			st:   backend.RunState{Roles: []trainingv1alpha1.RoleStatus{{Name: "Master", Failed: 1}, {Name: "Worker", Failed: 1, Active: 1}}},
			pods: []corev1.Pod{pod(corev1.PodFailed, false), pod(corev1.PodRunning, false)}, after: time.Second, want: 4 * time.Second,
		},
		"the child counts no failed pod": {
			st: backend.RunState{Roles: []trainingv1alpha1.RoleStatus{{Name: "Master", Active: 1}}}, after: time.Second,
		},
		"a deadline is explained without the pods": {
			st: backend.RunState{Roles: oneFailed, DeadlineExceeded: true}, after: time.Second,
		},
		"a failure without a time cannot be bounded": {
			st: backend.RunState{Roles: oneFailed, Failed: &backend.Transition{Reason: "BackoffLimitExceeded"}}, after: time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.st
			if st.Failed == nil {
				st.Failed = &backend.Transition{Reason: "BackoffLimitExceeded", Time: metav1.NewTime(failedAt)}
			}
			r := &Reconciler{FailedPodsGrace: tc.grace}
			s := &scope{tj: waitingJob(), run: 1, state: st, pods: tc.pods, now: failedAt.Add(tc.after)}
			if got := r.awaitFailedPods(s); got != tc.want {
				t.Errorf("waits %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAFailedRunWaitsTheGraceOnceWhateverTheChildsClock: the child's
// controller dates the failure an hour ahead of the operator's clock. The
// failure waits the grace from when the operator first saw it wait, not
// for the hour; a job created anew under the same name, and the next run,
// wait afresh.
func TestAFailedRunWaitsTheGraceOnceWhateverTheChildsClock(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	st := backend.RunState{
		Roles:  []trainingv1alpha1.RoleStatus{{Name: "pods", Failed: 1}},
		Failed: &backend.Transition{Reason: "BackoffLimitExceeded", Time: metav1.NewTime(now.Add(time.Hour))},
	}
	r := &Reconciler{}
	wait := func(tj *trainingv1alpha1.TrainingJob, run int32, at time.Duration) time.Duration {
		return r.awaitFailedPods(&scope{tj: tj, run: run, state: st, now: now.Add(at)})
	}
	tj := waitingJob()
	for _, step := range []struct {
		at, want time.Duration
	}{{0, 5 * time.Second}, {2 * time.Second, 3 * time.Second}, {5 * time.Second, 0}, {time.Minute, 0}} {
		if got := wait(tj, 1, step.at); got != step.want {
			t.Errorf("run 1 at +%v waits %v, want %v", step.at, got, step.want)
		}
	}
	if got := wait(tj, 2, time.Minute); got != 5*time.Second {
		t.Errorf("run 2, first seen at +1m, waits %v, want the grace", got)
	}
	again := waitingJob()
	again.UID = "created-anew"
	if got := wait(again, 1, 2*time.Minute); got != 5*time.Second {
		t.Errorf("a job created anew waits %v, want the grace", got)
	}
}

func waitingJob() *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "failing", UID: "first"}}
}
