package trainingjob

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/restart"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// kfStatus is what the kubeflow backend observes on a PyTorchJob with
// these conditions.
func kfStatus(conds ...kubeflowv1.JobConditionType) *backend.RunState {
	return observe(kfJobStatus(conds...))
}

func observe(st *kubeflowv1.JobStatus) *backend.RunState {
	out := kubeflowjob.NewBackend(testSettings, nil).Observe(&kubeflowv1.PyTorchJob{Status: *st})
	return &out
}

// specSuspended marks the child's own suspend flag set.
func specSuspended(st *backend.RunState) *backend.RunState {
	st.SpecSuspended = true
	return st
}

func kfJobStatus(conds ...kubeflowv1.JobConditionType) *kubeflowv1.JobStatus {
	s := &kubeflowv1.JobStatus{}
	for i, c := range conds {
		s.Conditions = append(s.Conditions, kubeflowv1.JobCondition{Type: c, Status: corev1.ConditionTrue, Reason: "PyTorchJob" + string(c),
			LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(i) * time.Minute))})
	}
	return s
}

// summary is the part of status the table compares.
type summary struct {
	Phase      trainingv1alpha1.TrainingJobPhase
	Conditions map[string]string // type -> status/reason
}

func summarize(tj *trainingv1alpha1.TrainingJob) summary {
	s := summary{Phase: tj.Status.Phase, Conditions: map[string]string{}}
	for _, c := range tj.Status.Conditions {
		s.Conditions[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return s
}

func TestSetStatus(t *testing.T) {
	missing := featureref.Resolution{Missing: []string{"fs"}}
	missingClaim := &claimObservation{name: "j-checkpoint", reason: "DependencyNotFound", message: "missing"}
	badClaim := &claimObservation{name: "j-checkpoint", stalled: true, reason: ReasonAccessModeMissing, message: "RWO only"}
	admitted := []metav1.Condition{{Type: "Queued", Status: metav1.ConditionFalse, Reason: ReasonAdmitted}}
	running := []metav1.Condition{{Type: "Running", Status: metav1.ConditionTrue, Reason: ReasonRunning, Message: "running"}}
	restartingBefore := []metav1.Condition{{Type: "Restarting", Status: metav1.ConditionTrue, Reason: "Preempted", Message: "run 2 at noon"}}
	restartEnd := &runEnd{restart: true, next: 2, record: trainingv1alpha1.RunRecord{Run: 1, Reason: "Preempted"}, message: "restart"}
	cases := map[string]struct {
		suspend bool
		queue   string
		before  []metav1.Condition
		o       observation
		want    summary
	}{
		"queued: waiting for admission": {
			queue: "q",
			o:     observation{job: specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended))},
			want: summary{Phase: "Queued", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Queued": "True/Waiting", "Running": "False/Queued", "Reconciling": "True/Queued", "Suspended": "False/NotSuspended"}},
		},
		"queued: no Workload from Kueue past the grace is Stalled, still Queued": {
			queue: "q",
			o:     observation{job: specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended)), queue: &queueObservation{noWorkload: "no Workload"}},
			want: summary{Phase: "Queued", Conditions: map[string]string{
				"Finished": "False/InProgress", "Ready": "False/NoWorkload", "Stalled": "True/NoWorkload",
				"Created": "True/JobCreated", "Queued": "True/Waiting", "Running": "False/Queued", "Suspended": "False/NotSuspended"}},
		},
		"queued: admitted, Kubeflow not caught up": {
			queue: "q",
			o:     observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended)},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Queued": "False/Admitted", "Running": "False/PodsPending", "Reconciling": "True/PodsPending", "Suspended": "False/NotSuspended"}},
		},
		"queued: admitted and running": {
			queue: "q",
			o:     observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning)},
			want: summary{Phase: "Running", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Queued": "False/Admitted", "Running": "True/Running", "Suspended": "False/NotSuspended"}},
		},
		"queued: evicted by Kueue is Queued again, not failed": {
			queue: "q", before: admitted,
			o: observation{job: specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended))},
			want: summary{Phase: "Queued", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Queued": "True/Evicted", "Running": "False/Queued", "Reconciling": "True/Queued", "Suspended": "False/NotSuspended"}},
		},
		"queued and suspended by the user: no job": {
			queue: "q", suspend: true,
			o: observation{},
			want: summary{Phase: "Suspended", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "Running": "False/Suspended", "Suspended": "True/Suspended"}},
		},
		"queued job's run ended by the user's suspend": {
			queue: "q", suspend: true, before: admitted,
			o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning), end: &runEnd{next: 2, record: trainingv1alpha1.RunRecord{Run: 1, Reason: "Suspended"}, message: "suspended"}},
			want: summary{Phase: "Suspended", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "Running": "False/Suspended", "Suspended": "True/Suspended"}},
		},
		"running, its child gone with its CRD: Stalled, not running, not failed": {
			before: running,
			o:      observation{childGone: true, invalid: errors.New("the PyTorchJob CRD is no longer served"), invalidReason: ReasonBackendUnavailable},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress", "Created": "False/JobNotCreated", "Running": "False/JobNotCreated",
				"Stalled": "True/BackendUnavailable"}},
		},
		"running, its child gone, the create finding its kind not served": {
			before: running,
			o:      observation{childGone: true, ref: &trainingv1alpha1.JobReference{Kind: "PyTorchJob"}, kind: "PyTorchJob", invalid: errors.New("no longer served"), invalidReason: ReasonBackendUnavailable},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress", "Created": "False/JobNotCreated", "Running": "False/JobNotCreated",
				"Stalled": "True/BackendUnavailable"}},
		},
		"run failed, restart decided": {
			o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobFailed), end: restartEnd},
			want: summary{Phase: "Restarting", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "Restarting": "True/Preempted", "Running": "False/Restarting", "Reconciling": "True/Restarting"}},
		},
		"backing off before the next run": {
			before: restartingBefore,
			o:      observation{},
			want: summary{Phase: "Restarting", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "Restarting": "True/Preempted", "Reconciling": "True/Restarting"}},
		},
		"next run created": {
			before: restartingBefore,
			o:      observation{job: kfStatus(kubeflowv1.JobCreated)},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Restarting": "False/RunStarted", "Running": "False/PodsPending", "Reconciling": "True/PodsPending", "Suspended": "False/NotSuspended"}},
		},
		"waiting for the checkpoint claim": {
			o: observation{claim: missingClaim},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "CheckpointReady": "False/DependencyNotFound", "Reconciling": "True/DependencyNotFound"}},
		},
		"claim without the access mode": {
			o: observation{claim: badClaim},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "CheckpointReady": "False/AccessModeNotOffered", "Stalled": "True/AccessModeNotOffered"}},
		},
		"no job yet": {
			o: observation{},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "Reconciling": "True/Progressing"}},
		},
		"waiting for a FeatureStore": {
			o: observation{stores: &missing},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "Reconciling": "True/DependencyNotFound", "FeatureStoresReady": "False/DependencyNotFound"}},
		},
		"invalid spec": {
			o: observation{invalid: errors.New("bad"), invalidReason: "InvalidSpec"},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "False/JobNotCreated", "Stalled": "True/InvalidSpec"}},
		},
		"created, pods pending": {
			o: observation{job: kfStatus(kubeflowv1.JobCreated)},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Running": "False/PodsPending", "Reconciling": "True/PodsPending", "Suspended": "False/NotSuspended"}},
		},
		"running": {
			o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning)},
			want: summary{Phase: "Running", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Running": "True/Running", "Suspended": "False/NotSuspended"}},
		},
		"restarting": {
			o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRestarting)},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Running": "False/Restarting", "Reconciling": "True/Restarting", "Suspended": "False/NotSuspended"}},
		},
		"suspend requested": {
			suspend: true,
			o:       observation{job: specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning))},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Running": "False/Suspending", "Reconciling": "True/Suspending", "Suspended": "False/Suspending"}},
		},
		"suspended": {
			suspend: true,
			o:       observation{job: specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended))},
			want: summary{Phase: "Suspended", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Running": "False/Suspended", "Suspended": "True/Suspended"}},
		},
		"resuming": {
			o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended)},
			want: summary{Phase: "Pending", Conditions: map[string]string{
				"Finished": "False/InProgress",
				"Created":  "True/JobCreated", "Running": "False/Resuming", "Reconciling": "True/Resuming", "Suspended": "False/Resuming"}},
		},
		"succeeded": {
			o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSucceeded)},
			want: summary{Phase: "Succeeded", Conditions: map[string]string{
				"Finished": "True/Succeeded",
				"Created":  "True/JobCreated", "Running": "False/Finished", "Suspended": "False/Finished", "Succeeded": "True/Succeeded", "Failed": "False/Succeeded"}},
		},
		"failed": {
			o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobFailed)},
			want: summary{Phase: "Failed", Conditions: map[string]string{
				"Finished": "True/Failed", "Stalled": "True/Failed",
				"Created": "True/JobCreated", "Running": "False/Finished", "Suspended": "False/Finished", "Failed": "True/Failed", "Succeeded": "False/Failed"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Generation: 2, CreationTimestamp: metav1.NewTime(t0)}}
			tj.Spec.Suspend = tc.suspend
			tj.Spec.QueueName = tc.queue
			tj.Status.Conditions = tc.before
			tc.o.kind, tc.o.jobName, tc.o.run, tc.o.now = "PyTorchJob", "j-r1", 1, t0.Add(time.Hour)
			if tc.o.job != nil {
				tc.o.localQueue = tc.queue
			}
			setStatus(tj, tc.o)
			if diff := cmp.Diff(tc.want, summarize(tj)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			for _, c := range tj.Status.Conditions {
				if c.ObservedGeneration != 2 {
					t.Errorf("condition %s observedGeneration %d, want 2", c.Type, c.ObservedGeneration)
				}
			}
		})
	}
}

func TestSetStatusRecordsTheRestartDurably(t *testing.T) {
	tj := &trainingv1alpha1.TrainingJob{}
	tj.Status.Run = 2
	tj.Status.RestartCount = 1
	tj.Status.Runs = []trainingv1alpha1.RunRecord{{Run: 1, Reason: "Preempted"}}
	next := metav1.NewTime(t0.Add(time.Minute))
	end := &runEnd{restart: true, next: 3, nextRunTime: &next, message: "m",
		record: trainingv1alpha1.RunRecord{Run: 2, Reason: "NodeLost", Class: trainingv1alpha1.FailureClassInfrastructure}}
	setStatus(tj, observation{kind: "PyTorchJob", jobName: "j-r2", run: 2, job: kfStatus(kubeflowv1.JobFailed), end: end, now: t0})
	if tj.Status.Run != 3 || tj.Status.RestartCount != 2 || tj.Status.NextRunTime == nil || !tj.Status.NextRunTime.Equal(&next) {
		t.Errorf("run %d restarts %d next %v, want 3, 2, %v", tj.Status.Run, tj.Status.RestartCount, tj.Status.NextRunTime, next)
	}
	want := []trainingv1alpha1.RunRecord{{Run: 1, Reason: "Preempted"}, end.record}
	if diff := cmp.Diff(want, tj.Status.Runs); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	if conditions.IsTrue(tj, commonv1alpha1.ConditionFailed) {
		t.Error("a restarted run must not fail the job")
	}
}

func TestRunHistoryKeepsTheNewest(t *testing.T) {
	tj := &trainingv1alpha1.TrainingJob{}
	for i := int32(1); i <= 13; i++ {
		appendRun(tj, trainingv1alpha1.RunRecord{Run: i})
	}
	if n := len(tj.Status.Runs); n != maxRunHistory || tj.Status.Runs[0].Run != 4 || tj.Status.Runs[n-1].Run != 13 {
		t.Errorf("history %+v, want runs 4..13", tj.Status.Runs)
	}
}

func TestFailedMessageExplainsWhyNotRestarted(t *testing.T) {
	tj := &trainingv1alpha1.TrainingJob{}
	tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{}
	oom := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-r1-master-0"},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "pytorch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}}
	d := &restart.Decision{Reason: restart.ReasonNotRetryable, Message: "not one a new run fixes"}
	setStatus(tj, observation{kind: "PyTorchJob", jobName: "j-r1", run: 1, job: kfStatus(kubeflowv1.JobFailed), pods: []corev1.Pod{oom}, decision: d, now: t0})
	c := conditions.Get(tj, commonv1alpha1.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Failed %+v", c)
	}
	want := "The run's job failed; container pytorch of pod j-r1-master-0 was OOMKilled (memory limit 8Gi): OOMKilled; not restarted: not one a new run fixes"
	if c.Message != want {
		t.Errorf("message\n%q, want\n%q", c.Message, want)
	}
	if f := tj.Status.Failure; f.Cause != "OOMKilled" || f.MemoryLimit != "8Gi" || f.Class != trainingv1alpha1.FailureClassUser {
		t.Errorf("failure %+v", f)
	}
	if len(tj.Status.Runs) != 1 || tj.Status.Runs[0].Reason != "OOMKilled" {
		t.Errorf("history %+v", tj.Status.Runs)
	}
}

func TestSetStatusKeepsARecordedOutcome(t *testing.T) {
	tj := &trainingv1alpha1.TrainingJob{}
	conditions.MarkSucceeded(tj, ReasonSucceeded, "done")
	tj.Status.Phase = trainingv1alpha1.PhaseSucceeded
	before := tj.DeepCopy()
	// The job was cleaned up since: nothing observed must undo the outcome.
	setStatus(tj, observation{kind: "PyTorchJob", jobName: "j-r1", now: t0})
	if diff := cmp.Diff(before.Status, tj.Status); diff != "" {
		t.Errorf("a recorded outcome changed (-before +after):\n%s", diff)
	}
}

func TestFinishTimes(t *testing.T) {
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}
	setStatus(tj, observation{kind: "PyTorchJob", jobName: "j-r1", job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning), now: t0.Add(time.Hour)})
	if got := tj.Status.StartTime; got == nil || !got.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("startTime %v, want the Running condition's transition", got)
	}
	done := kfJobStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning)
	done.CompletionTime = ptr.To(metav1.NewTime(t0.Add(91 * time.Minute)))
	done.Conditions = append(done.Conditions, kubeflowv1.JobCondition{Type: kubeflowv1.JobSucceeded, Status: corev1.ConditionTrue})
	setStatus(tj, observation{kind: "PyTorchJob", jobName: "j-r1", job: observe(done), now: t0.Add(2 * time.Hour)})
	if tj.Status.Duration != "1h30m0s" || !tj.Status.CompletionTime.Time.Equal(t0.Add(91*time.Minute)) {
		t.Errorf("duration %q completion %v", tj.Status.Duration, tj.Status.CompletionTime)
	}
}

func TestExplainFailure(t *testing.T) {
	term := func(code int32, msg string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Error"}
	}
	pod := func(name string, state, last *corev1.ContainerStateTerminated) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "pytorch", State: corev1.ContainerState{Terminated: state}, LastTerminationState: corev1.ContainerState{Terminated: last},
		}}}}
	}
	failed := &backend.Transition{Reason: "PyTorchJobFailed", Message: "1 Worker failed"}
	deleting := pod("j-worker-0", nil, nil)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	cases := map[string]struct {
		pods     []corev1.Pod
		deadline bool
		want     trainingv1alpha1.Failure
	}{
		// The child's controller deleted the running pods at the deadline:
		// they look deleted, and a new run would only run out of time again.
		"the run's deadline passed": {
			pods: []corev1.Pod{deleting}, deadline: true,
			want: trainingv1alpha1.Failure{Reason: "PyTorchJobFailed", Message: "1 Worker failed", Class: "User", Cause: "DeadlineExceeded"},
		},
		"pods deleted before the deadline": {
			pods: []corev1.Pod{deleting},
			want: trainingv1alpha1.Failure{Reason: "PyTorchJobFailed", Message: "1 Worker failed", Class: "Infrastructure", Cause: "PodDeleted", Pod: "j-worker-0"},
		},
		"no pods": {want: trainingv1alpha1.Failure{Reason: "PyTorchJobFailed", Message: "1 Worker failed", Class: "Unknown", Cause: "Unknown"}},
		"first failed pod by name": {
			pods: []corev1.Pod{pod("j-worker-0", term(2, "worker boom"), nil), pod("j-master-0", nil, term(1, "master boom"))},
			want: trainingv1alpha1.Failure{Reason: "PyTorchJobFailed", Message: "1 Worker failed", Class: "User", Cause: "Error", Pod: "j-master-0", Container: "pytorch", ExitCode: 1, TerminationMessage: "master boom"},
		},
		"successful containers are not failures": {
			pods: []corev1.Pod{pod("j-master-0", term(0, "fine"), nil)},
			want: trainingv1alpha1.Failure{Reason: "PyTorchJobFailed", Message: "1 Worker failed", Class: "Unknown", Cause: "Unknown"},
		},
		"empty message falls back to the reason": {
			pods: []corev1.Pod{pod("j-master-0", term(137, ""), nil)},
			want: trainingv1alpha1.Failure{Reason: "PyTorchJobFailed", Message: "1 Worker failed", Class: "User", Cause: "Killed", Pod: "j-master-0", Container: "pytorch", ExitCode: 137, TerminationMessage: "Error"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainingv1alpha1.TrainingJob{Spec: trainingv1alpha1.TrainingJobSpec{RunPolicy: trainingv1alpha1.RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600)}}}
			st := backend.RunState{Failed: failed, DeadlineExceeded: tc.deadline}
			if diff := cmp.Diff(&tc.want, explainFailure(tj, st, tc.pods)); diff != "" {
				t.Errorf("failure (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransitionEvents(t *testing.T) {
	c := func(t string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: "R", Message: t + " message"}
	}
	cases := map[string]struct {
		before, after []metav1.Condition
		want          []string
	}{
		"nothing changed": {
			before: []metav1.Condition{c("Running", "True")},
			after:  []metav1.Condition{c("Running", "True")},
		},
		// The child's own events say it was created; one of ours would
		// cost the native backend its sixth write.
		"created is in status only": {
			after: []metav1.Condition{c("Created", "True"), c("Running", "False")},
		},
		"running is in status only": {
			before: []metav1.Condition{c("Created", "True"), c("Running", "False")},
			after:  []metav1.Condition{c("Created", "True"), c("Running", "True")},
		},
		"running then succeeded in one step": {
			before: []metav1.Condition{c("Created", "True")},
			after:  []metav1.Condition{c("Created", "True"), c("Running", "True"), c("Succeeded", "True")},
			want:   []string{"Normal/Succeeded"},
		},
		"failed": {
			before: []metav1.Condition{c("Running", "True")},
			after:  []metav1.Condition{c("Running", "False"), c("Failed", "True")},
			want:   []string{"Warning/Failed"},
		},
		// A failed job is Stalled too (kstatus Failed), with one event.
		"failed and stalled": {
			before: []metav1.Condition{c("Running", "True")},
			after:  []metav1.Condition{c("Running", "False"), c("Failed", "True"), c("Stalled", "True")},
			want:   []string{"Warning/Failed"},
		},
		"suspended and resumed": {
			before: []metav1.Condition{c("Suspended", "True")},
			after:  []metav1.Condition{c("Suspended", "False")},
			want:   []string{"Normal/Resumed"},
		},
		"waiting for stores and stalled": {
			after: []metav1.Condition{c("FeatureStoresReady", "False"), {Type: "Stalled", Status: "True", Reason: "InvalidSpec"}},
			want:  []string{"Warning/WaitingForFeatureStores", "Warning/InvalidSpec"},
		},
		"waiting for stores that are only not ready yet": {
			after: []metav1.Condition{{Type: "FeatureStoresReady", Status: "False", Reason: "DependencyNotReady"}},
			want:  []string{"Normal/WaitingForFeatureStores"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range transitionEvents(tc.before, tc.after) {
				got = append(got, e.Type+"/"+e.Reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodIssues(t *testing.T) {
	pending := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Status: corev1.PodStatus{
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes have nvidia.com/gpu"}},
	}}
	oom := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: "v"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "pytorch", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}},
	}}}}
	running := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r", UID: "w"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	var got []string
	for _, is := range podIssues([]corev1.Pod{pending, oom, running}) {
		got = append(got, is.Reason)
	}
	if diff := cmp.Diff([]string{"PodUnschedulable", "PodCrashLoopBackOff", "PodOOMKilled"}, got); diff != "" {
		t.Errorf("issues (-want +got):\n%s", diff)
	}
}

// TestUnschedulableIsReportedOncePerRun: every rank of a run waits for the
// same capacity, so the job says so once per run, not once per pod.
func TestUnschedulableIsReportedOncePerRun(t *testing.T) {
	unschedulable := func(name, run string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: map[string]string{trainingv1alpha1.LabelRun: run}}, Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes have nvidia.com/gpu"}},
		}}
	}
	r := &Reconciler{}
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{UID: "tj"}}
	count := func(events []event) int {
		n := 0
		for _, e := range events {
			if e.Reason == "PodUnschedulable" {
				n++
			}
		}
		return n
	}
	if n := count(r.podIssueEvents(tj, []corev1.Pod{unschedulable("a-0", "1"), unschedulable("a-1", "1")})); n != 1 {
		t.Errorf("two unschedulable ranks of run 1 gave %d events, want 1", n)
	}
	if n := count(r.podIssueEvents(tj, []corev1.Pod{unschedulable("a-0", "1"), unschedulable("a-1", "1"), unschedulable("a-2", "1")})); n != 0 {
		t.Errorf("a third unschedulable rank of run 1 gave %d events, want none", n)
	}
	if n := count(r.podIssueEvents(tj, []corev1.Pod{unschedulable("b-0", "2")})); n != 1 {
		t.Errorf("an unschedulable rank of run 2 gave %d events, want 1", n)
	}
}

// TestPodIssuesOfAJobThatIsGoneAreForgotten: what a job reported is
// remembered while the job exists, and forgotten by the reconcile that
// finds it gone (a job cancelled while its pods could not start leaves
// nothing behind in the operator's memory); a job created anew under the
// same name reports its issues again.
func TestPodIssuesOfAJobThatIsGoneAreForgotten(t *testing.T) {
	pending := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "gone-r1-0", UID: "p", Labels: map[string]string{trainingv1alpha1.LabelRun: "1"}}, Status: corev1.PodStatus{
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes have nvidia.com/gpu"}},
	}}}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c, APIReader: c}
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", UID: "first"}}
	if n := len(r.podIssueEvents(tj, pending)); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	if n := len(r.podIssueEvents(tj, pending)); n != 0 {
		t.Errorf("the same issue again gave %d events, want none", n)
	}
	again := tj.DeepCopy()
	again.UID = "second"
	if n := len(r.podIssueEvents(again, pending)); n != 1 {
		t.Errorf("a new job of the same name gave %d events, want 1", n)
	}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
		t.Fatal(err)
	}
	if len(r.reported) != 0 {
		t.Errorf("the operator still remembers %d jobs that are gone", len(r.reported))
	}
}

func TestTTLExpiry(t *testing.T) {
	finishedAt := metav1.NewTime(t0)
	withCond := func(typ string, ttl *int32) *trainingv1alpha1.TrainingJob {
		tj := &trainingv1alpha1.TrainingJob{}
		tj.Spec.RunPolicy.TTLSecondsAfterFinished = ttl
		if typ != "" {
			tj.Status.Conditions = []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, LastTransitionTime: finishedAt}}
		}
		return tj
	}
	cases := map[string]struct {
		tj     *trainingv1alpha1.TrainingJob
		want   time.Time
		wantOK bool
	}{
		"no ttl":               {tj: withCond(commonv1alpha1.ConditionSucceeded, nil)},
		"not finished":         {tj: withCond("", ptr.To[int32](10))},
		"running":              {tj: withCond(trainingv1alpha1.ConditionRunning, ptr.To[int32](10))},
		"succeeded":            {tj: withCond(commonv1alpha1.ConditionSucceeded, ptr.To[int32](90)), want: t0.Add(90 * time.Second), wantOK: true},
		"failed":               {tj: withCond(commonv1alpha1.ConditionFailed, ptr.To[int32](3600)), want: t0.Add(time.Hour), wantOK: true},
		"zero deletes at once": {tj: withCond(commonv1alpha1.ConditionSucceeded, ptr.To[int32](0)), want: t0, wantOK: true},
		// The child finished 42 s before the operator noticed (an
		// apiserver outage): the TTL counts from the child's time.
		"from the child's completion time": {tj: func() *trainingv1alpha1.TrainingJob {
			tj := withCond(commonv1alpha1.ConditionSucceeded, ptr.To[int32](60))
			tj.Status.CompletionTime = ptr.To(metav1.NewTime(t0.Add(-42 * time.Second)))
			return tj
		}(), want: t0.Add(18 * time.Second), wantOK: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ttlExpiry(tc.tj)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Errorf("ttlExpiry = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestWithRemainingDeadline(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := func(deadline *int64, started time.Duration) *trainingv1alpha1.TrainingJob {
		tj := &trainingv1alpha1.TrainingJob{Spec: trainingv1alpha1.TrainingJobSpec{RunPolicy: trainingv1alpha1.RunPolicy{ActiveDeadlineSeconds: deadline}}}
		if started >= 0 {
			tj.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-started)))
		}
		return tj
	}
	resumed := func(after ...trainingv1alpha1.RunRecord) *trainingv1alpha1.TrainingJob {
		tj := job(ptr.To[int64](60), time.Hour)
		tj.Status.Runs = append([]trainingv1alpha1.RunRecord{{Run: 1, Reason: ReasonSuspended, StartTime: tj.Status.StartTime}}, after...)
		return tj
	}
	cases := map[string]struct {
		tj   *trainingv1alpha1.TrainingJob
		want *int64
	}{
		// A resume starts the deadline anew, as for a Kubernetes Job.
		"the first run after a resume: all of it": {tj: resumed(), want: ptr.To[int64](60)},
		"a restart after a resume: the rest since that run started": {
			tj:   resumed(trainingv1alpha1.RunRecord{Run: 2, Reason: "Preempted", StartTime: ptr.To(metav1.NewTime(now.Add(-20 * time.Second)))}),
			want: ptr.To[int64](40),
		},
		"no deadline":                      {tj: job(nil, time.Hour), want: nil},
		"never ran: all of it":             {tj: job(ptr.To[int64](60), -1), want: ptr.To[int64](60)},
		"just started: all of it":          {tj: job(ptr.To[int64](60), 0), want: ptr.To[int64](60)},
		"ran 10.5 s: the rest, rounded up": {tj: job(ptr.To[int64](60), 10500*time.Millisecond), want: ptr.To[int64](50)},
		"past the end: one second":         {tj: job(ptr.To[int64](60), time.Hour), want: ptr.To[int64](1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.tj.DeepCopy()
			got := withRemainingDeadline(tc.tj, now)
			if diff := cmp.Diff(tc.want, got.Spec.RunPolicy.ActiveDeadlineSeconds); diff != "" {
				t.Errorf("deadline (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.tj); diff != "" {
				t.Errorf("the job itself changed (-before +after):\n%s", diff)
			}
		})
	}
}
