package trainingjob

import (
	"fmt"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// deadlineJob drives a TrainingJob's status through setStatus, as the
// reconciles of its life would write it, with a one-hour deadline.
type deadlineJob struct {
	t  *testing.T
	tj *trainingv1alpha1.TrainingJob
}

func newDeadlineJob(t *testing.T, queue string) *deadlineJob {
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
	tj.Spec.QueueName = queue
	tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](3600)
	return &deadlineJob{t: t, tj: tj}
}

func (d *deadlineJob) observe(st backend.RunState, at time.Time, end *runEnd) {
	run := max(d.tj.Status.Run, 1)
	o := observation{kind: "PyTorchJob", jobName: fmt.Sprintf("j-r%d", run), run: run, job: &st, end: end, now: at, localQueue: d.tj.Spec.QueueName}
	if st.StartTime != nil {
		o.runStart = st.StartTime
	}
	setStatus(d.tj, o)
}

// running: the current run's child runs, started at start.
func (d *deadlineJob) running(start, at time.Time) {
	d.observe(backend.RunState{StartTime: ptr.To(metav1.NewTime(start)), Running: &backend.Transition{Time: metav1.NewTime(start)}}, at, nil)
}

// ends records the end of the current run: a restart after an
// infrastructure failure, or a queued job's suspension.
func (d *deadlineJob) ends(reason string, restart bool, at time.Time) {
	run := max(d.tj.Status.Run, 1)
	next := metav1.NewTime(at)
	d.observe(backend.RunState{}, at, &runEnd{restart: restart, next: run + 1, nextRunTime: &next,
		record: trainingv1alpha1.RunRecord{Run: run, Reason: reason, EndTime: &next}})
}

// remaining is the deadline the next child would get at now.
func (d *deadlineJob) remaining(now time.Time) int64 {
	return *withRemainingDeadline(d.tj, now).Spec.RunPolicy.ActiveDeadlineSeconds
}

// TestDeadlineSurvivesTheRunHistory: the resume that started the deadline
// anew is remembered although its run record left the bounded history:
// a job suspended long, resumed and then preempted ten times still gets
// what is left of the deadline since the resume, not one second.
func TestDeadlineSurvivesTheRunHistory(t *testing.T) {
	d := newDeadlineJob(t, "q")
	d.running(t0, t0)
	d.ends(ReasonSuspended, false, t0.Add(30*time.Minute))
	resumed := t0.Add(5 * time.Hour)
	d.running(resumed, resumed)
	at := resumed
	for range maxRunHistory {
		at = at.Add(time.Minute)
		d.ends("Preempted", true, at)
		d.running(at, at)
	}
	if got, want := d.remaining(at), int64(3600-10*60); got != want {
		t.Errorf("the next run gets %ds of the deadline, want %ds (an hour since the resume at %s, ten minutes gone)", got, want, resumed)
	}
	if end, _ := deadlineEnd(d.tj, nil); !end.Equal(resumed.Add(time.Hour)) {
		t.Errorf("the deadline ends at %s, want %s", end, resumed.Add(time.Hour))
	}
}

// TestDeadlineStartsAnewOnReadmission: Kueue's eviction and readmission
// restart the child's own deadline (the Job controller and the
// training-operator reset its startTime); the operator's arithmetic for the
// restarts that follow counts from there too.
func TestDeadlineStartsAnewOnReadmission(t *testing.T) {
	d := newDeadlineJob(t, "q")
	d.running(t0, t0)
	evicted := t0.Add(50 * time.Minute)
	d.observe(backend.RunState{SpecSuspended: true, StartTime: ptr.To(metav1.NewTime(t0))}, evicted, nil)
	readmitted := t0.Add(3 * time.Hour)
	d.running(readmitted, readmitted)
	if end, _ := deadlineEnd(d.tj, ptr.To(metav1.NewTime(readmitted))); !end.Equal(readmitted.Add(time.Hour)) {
		t.Errorf("a failure of the readmitted run finds the deadline ending at %s, want %s", end, readmitted.Add(time.Hour))
	}
	d.ends("Preempted", true, readmitted.Add(10*time.Minute))
	if got, want := d.remaining(readmitted.Add(10*time.Minute)), int64(3000); got != want {
		t.Errorf("the restart gets %ds of the deadline, want %ds", got, want)
	}
}

// TestDeadlineStartsAnewOnResumeInPlace: a job without a queue is suspended
// in place, and its child's deadline restarts on resume; so does the
// operator's.
func TestDeadlineStartsAnewOnResumeInPlace(t *testing.T) {
	d := newDeadlineJob(t, "")
	d.running(t0, t0)
	d.tj.Spec.Suspend = true
	d.observe(backend.RunState{SpecSuspended: true, Suspended: &backend.Transition{Time: metav1.NewTime(t0.Add(20 * time.Minute))}}, t0.Add(20*time.Minute), nil)
	d.tj.Spec.Suspend = false
	resumed := t0.Add(2 * time.Hour)
	d.observe(backend.RunState{SpecSuspended: true, Suspended: &backend.Transition{Time: metav1.NewTime(t0.Add(20 * time.Minute))}}, resumed, nil)
	d.running(resumed.Add(5*time.Second), resumed.Add(10*time.Second))
	d.ends("NodeLost", true, resumed.Add(30*time.Minute))
	if got, want := d.remaining(resumed.Add(30*time.Minute)), int64(1800); got != want {
		t.Errorf("the restart gets %ds of the deadline, want %ds", got, want)
	}
}

// TestDeadlineOfAJobFromThePreviousVersion: a job whose status predates
// status.deadlineStartTime counts, as before, from startTime or from the
// first run after its last suspension in the history.
func TestDeadlineOfAJobFromThePreviousVersion(t *testing.T) {
	d := newDeadlineJob(t, "q")
	d.tj.Status.Run = 3
	d.tj.Status.StartTime = ptr.To(metav1.NewTime(t0))
	d.tj.Status.Runs = []trainingv1alpha1.RunRecord{
		{Run: 1, Reason: ReasonSuspended, StartTime: ptr.To(metav1.NewTime(t0))},
		{Run: 2, Reason: "Preempted", StartTime: ptr.To(metav1.NewTime(t0.Add(2 * time.Hour)))},
	}
	if got, want := d.remaining(t0.Add(2*time.Hour+time.Minute)), int64(3540); got != want {
		t.Errorf("the next run gets %ds, want %ds", got, want)
	}
	d.running(t0.Add(2*time.Hour+2*time.Minute), t0.Add(2*time.Hour+2*time.Minute))
	if got, want := d.remaining(t0.Add(2*time.Hour+3*time.Minute)), int64(3420); got != want {
		t.Errorf("once running again, the next run gets %ds, want %ds", got, want)
	}
}

// TestKueueReadmissionRestartsTheDeadline: a queued job that Kueue evicts
// and readmits two hours later, past an hour's deadline counted from its
// first start, runs on with the deadline counted from the readmission, as
// its child does: a preemption that follows restarts it with what is left
// of that hour instead of failing it for its deadline.
func TestKueueReadmissionRestartsTheDeadline(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	clk := &testClock{}
	startOperator(t, func(r *Reconciler) { r.Clock = clk })
	tj := checkpointed(ns, "readmit", 1, 3, 0)
	tj.Spec.QueueName = "team-a"
	tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](3600)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "readmit-r1")
	kueueAdmit(t, c, job)
	pods := startPods(t, c, job)
	waitTJ(t, c, tj, "running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	kueueEvict(t, c, job, pods)
	waitTJ(t, c, tj, "Queued after the eviction", func(tj *trainingv1alpha1.TrainingJob) bool { return queuedStatus(tj, ReasonEvicted) })

	clk.advance(2 * time.Hour)
	readmitted := clk.Now().Truncate(time.Second)
	kueueAdmit(t, c, job)
	setJobStatus(t, c, job, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobSuspended, corev1.ConditionFalse, "PyTorchJobResumed", "")
	})
	disruptRun(t, c, job, corev1.PodReasonPreemptionByScheduler)

	got := waitTJ(t, c, tj, "run 2 decided", func(tj *trainingv1alpha1.TrainingJob) bool {
		return tj.Status.Run == 2 || conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	if conditions.IsTrue(got, commonv1alpha1.ConditionFailed) {
		t.Fatalf("the readmitted run's preemption failed the job: %s", conditions.Get(got, commonv1alpha1.ConditionFailed).Message)
	}
	if s := got.Status.DeadlineStartTime; s == nil || s.Time.Before(readmitted) {
		t.Errorf("deadlineStartTime %v, want the readmission at %s or later", s, readmitted)
	}
	run2 := waitPyTorchJob(t, c, ns, "readmit-r2")
	if d := ptr.Deref(run2.Spec.RunPolicy.ActiveDeadlineSeconds, 0); d < 3000 {
		t.Errorf("run 2 gets %ds of the deadline, want nearly the hour since the readmission", d)
	}
}
