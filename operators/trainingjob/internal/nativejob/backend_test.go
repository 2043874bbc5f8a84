package nativejob

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

func TestBuildIsOneIndexedJobThatNeverRetries(t *testing.T) {
	tj := newTJ(trainingv1alpha1.FrameworkPyTorch, 4)
	tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](600)
	tj.Spec.RunPolicy.BackoffLimit = ptr.To[int32](5)
	b := NewBackend(settings)
	obj, err := b.Build(tj, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := obj.(*batchv1.Job)
	if job.Name != "mnist-r2" || job.Namespace != "team-a" {
		t.Errorf("job = %s/%s", job.Namespace, job.Name)
	}
	spec := job.Spec
	if *spec.CompletionMode != batchv1.IndexedCompletion || *spec.Completions != 4 || *spec.Parallelism != 4 {
		t.Errorf("mode %v completions %d parallelism %d, want Indexed 4 4", *spec.CompletionMode, *spec.Completions, *spec.Parallelism)
	}
	// The user's backoffLimit has no effect on either backend: restarts
	// are runs, decided by the operator.
	if *spec.BackoffLimit != 0 || spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("backoffLimit %d restartPolicy %s, want 0 Never", *spec.BackoffLimit, spec.Template.Spec.RestartPolicy)
	}
	if *spec.ActiveDeadlineSeconds != 600 || *spec.Suspend {
		t.Errorf("activeDeadlineSeconds %d suspend %t", *spec.ActiveDeadlineSeconds, *spec.Suspend)
	}
	// The ranks are the subdomain of the namespace's Service for them,
	// which package rankdns creates; the run makes no Service.
	if spec.Template.Spec.Subdomain != rankdns.Service {
		t.Errorf("subdomain %q, want the namespace's Service for the ranks", spec.Template.Spec.Subdomain)
	}
	if _, ok := any(b).(backend.Companions); ok {
		t.Error("the native backend makes companions: a run needs no object beside its Job")
	}
	if p := spec.Template.Spec.Containers[0].Ports; len(p) != 1 || p[0].ContainerPort == 0 {
		t.Errorf("container ports %v", p)
	}
}

// TestSinglePodRunHasNoServiceAndNoPeerNames: a run of one pod has nobody
// to find, so it gets no subdomain (no slice of its ranks is written) and
// no host name of a Service in its environment.
func TestSinglePodRunHasNoServiceAndNoPeerNames(t *testing.T) {
	for _, fw := range []trainingv1alpha1.Framework{trainingv1alpha1.FrameworkPyTorch, trainingv1alpha1.FrameworkXGBoost, trainingv1alpha1.FrameworkTensorFlow, trainingv1alpha1.FrameworkPaddle} {
		t.Run(string(fw), func(t *testing.T) {
			b := NewBackend(settings)
			tj := newTJ(fw, 1)
			obj, err := b.Build(tj, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			spec := obj.(*batchv1.Job).Spec.Template.Spec
			if spec.Subdomain != "" {
				t.Errorf("subdomain %q for a run of one pod", spec.Subdomain)
			}
			for k, v := range expand(spec.Containers[0].Env, 0) {
				if strings.Contains(v, rankdns.Service) || strings.Contains(v, "mnist-r1") && k != "PADDLE_JOB_ID" {
					t.Errorf("%s=%q names a host of the run's Service", k, v)
				}
			}
		})
	}
	obj, err := NewBackend(settings).Build(newTJ(trainingv1alpha1.FrameworkPyTorch, 2), 1, nil)
	if err != nil || obj.(*batchv1.Job).Spec.Template.Spec.Subdomain != rankdns.Service {
		t.Errorf("a two-pod run: %v, want its ranks in the namespace's Service (%v)", obj, err)
	}
}

func TestBuildQueuedAndSuspended(t *testing.T) {
	cases := map[string]struct {
		queue       string
		suspend     bool
		wantSuspend bool
	}{
		"plain":             {},
		"suspended":         {suspend: true, wantSuspend: true},
		"queued":            {queue: "team-a", wantSuspend: true},
		"queued, suspended": {queue: "team-a", suspend: true, wantSuspend: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := newTJ(trainingv1alpha1.FrameworkXGBoost, 2)
			tj.Spec.QueueName, tj.Spec.Suspend = tc.queue, tc.suspend
			obj, err := NewBackend(settings).Build(tj, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			job := obj.(*batchv1.Job)
			if *job.Spec.Suspend != tc.wantSuspend {
				t.Errorf("suspend = %t, want %t", *job.Spec.Suspend, tc.wantSuspend)
			}
			if got := job.Labels[trainingv1alpha1.LabelKueueQueueName]; got != tc.queue {
				t.Errorf("queue label = %q, want %q", got, tc.queue)
			}
			if _, ok := job.Spec.Template.Labels[trainingv1alpha1.LabelKueueQueueName]; ok {
				t.Error("the pods carry the queue label; Kueue admits the Job, not its pods")
			}
		})
	}
}

func TestBuildCheckpointMountsEveryRank(t *testing.T) {
	tj := newTJ(trainingv1alpha1.FrameworkPyTorch, 2)
	tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi")), AccessMode: corev1.ReadWriteMany, MountPath: "/ckpt"}
	tj.Status.RestartCount = 1
	obj, err := NewBackend(settings).Build(tj, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := obj.(*batchv1.Job).Spec.Template.Spec
	var claim string
	for _, v := range spec.Volumes {
		if v.Name == trainingv1alpha1.CheckpointVolume {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	if claim != "mnist-checkpoint" {
		t.Errorf("checkpoint claim %q", claim)
	}
	env := expand(spec.Containers[0].Env, 1)
	want := map[string]string{trainingv1alpha1.EnvCheckpointDir: "/ckpt", trainingv1alpha1.EnvRun: "2", trainingv1alpha1.EnvRestartCount: "1", trainingv1alpha1.EnvResume: "true"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestValidateRejectsWhatOneTemplateCannotRun(t *testing.T) {
	ps := newTJ(trainingv1alpha1.FrameworkTensorFlow, 2)
	ps.Spec.ParameterServers = ptr.To[int32](1)
	cases := map[string]struct {
		tj      *trainingv1alpha1.TrainingJob
		invalid bool
	}{
		"tensorflow with parameter servers": {tj: ps, invalid: true},
		"paddle with two workers":           {tj: newTJ(trainingv1alpha1.FrameworkPaddle, 2), invalid: true},
		"paddle alone":                      {tj: newTJ(trainingv1alpha1.FrameworkPaddle, 1)},
		"unknown framework":                 {tj: newTJ("mxnet", 2), invalid: true},
		"tensorflow workers":                {tj: newTJ(trainingv1alpha1.FrameworkTensorFlow, 3)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewBackend(settings).Build(tc.tj, 1, nil)
			var invalid *backend.InvalidSpecError
			if got := errors.As(err, &invalid); got != tc.invalid {
				t.Errorf("invalid = %t (%v), want %t", got, err, tc.invalid)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	done := metav1.Date(2026, 11, 23, 10, 0, 0, 0, metav1.Now().Location())
	later := metav1.NewTime(done.Add(40e9))
	cases := map[string]struct {
		job  batchv1.Job
		want backend.RunState
	}{
		"created, nothing ready": {
			job:  job(2, false, 0, batchv1.JobStatus{Active: 2}),
			want: backend.RunState{},
		},
		"one of two ready": {
			job:  job(2, false, 1, batchv1.JobStatus{Active: 2}),
			want: backend.RunState{},
		},
		"all ready": {
			job:  job(2, false, 2, batchv1.JobStatus{Active: 2}),
			want: backend.RunState{Running: &backend.Transition{Reason: "Running", Message: "Job j: all 2 pods are ready"}},
		},
		"one rank done, the other still ready": {
			job:  job(2, false, 1, batchv1.JobStatus{Active: 1, Succeeded: 1}),
			want: backend.RunState{Running: &backend.Transition{Reason: "Running", Message: "Job j: all 2 pods are ready"}},
		},
		"one rank done, the other not ready": {
			job:  job(2, false, 0, batchv1.JobStatus{Active: 1, Succeeded: 1}),
			want: backend.RunState{},
		},
		"suspended by kueue": {
			job:  job(2, true, 0, batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended"}}}),
			want: backend.RunState{SpecSuspended: true, Suspended: &backend.Transition{Reason: "JobSuspended"}},
		},
		// The time the Job recorded is the terminal time, not when the
		// operator happened to look: the decision's (SuccessCriteriaMet),
		// which the Job controller writes before Complete and completionTime.
		"complete": {
			job: job(2, false, 0, batchv1.JobStatus{Succeeded: 2, CompletionTime: &later, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: done},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: later},
			}}),
			want: backend.RunState{Succeeded: &backend.Transition{Time: done}, Roles: []trainingv1alpha1.RoleStatus{{Name: RolePods, Succeeded: 2}}},
		},
		// Seen before and after the Job is Complete, the run ended at the
		// same time: when the Job controller decided it.
		"success decided, pods not yet gone": {
			job: job(2, false, 0, batchv1.JobStatus{Succeeded: 2, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: done},
			}}),
			want: backend.RunState{Succeeded: &backend.Transition{Time: done}, Roles: []trainingv1alpha1.RoleStatus{{Name: RolePods, Succeeded: 2}}},
		},
		"complete on a cluster without SuccessCriteriaMet": {
			job: job(2, false, 0, batchv1.JobStatus{Succeeded: 2, CompletionTime: &later, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: later},
			}}),
			want: backend.RunState{Succeeded: &backend.Transition{Time: later}, Roles: []trainingv1alpha1.RoleStatus{{Name: RolePods, Succeeded: 2}}},
		},
		"failure target before the pods are gone": {
			job: job(2, false, 1, batchv1.JobStatus{Active: 1, Failed: 1, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: done},
			}}),
			want: backend.RunState{Failed: &backend.Transition{Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", Time: done}, Roles: []trainingv1alpha1.RoleStatus{{Name: RolePods, Active: 1, Failed: 1}}},
		},
		// The Job controller deletes the running pods itself at the deadline
		// (FailureTarget first, then Failed once they are gone).
		"deadline exceeded": {
			job: job(2, false, 2, batchv1.JobStatus{Active: 2, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline", LastTransitionTime: done},
			}}),
			want: backend.RunState{
				Failed:           &backend.Transition{Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline", Time: done},
				DeadlineExceeded: true,
				Roles:            []trainingv1alpha1.RoleStatus{{Name: RolePods, Active: 2}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := NewBackend(settings).Observe(&tc.job)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func job(parallelism int32, suspend bool, ready int32, st batchv1.JobStatus) batchv1.Job {
	st.Ready = ptr.To(ready)
	return batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j"},
		Spec:       batchv1.JobSpec{Parallelism: ptr.To(parallelism), Suspend: ptr.To(suspend)},
		Status:     st,
	}
}

// TestBuildBindsEveryRankToItsStoresOnly: the pods of a run carry one
// binding label per referenced store, and a binding label written into the
// job's pod template (a store the job does not reference) is gone, so the
// FeatureStore's NetworkPolicy admits the ranks to their own stores only.
func TestBuildBindsEveryRankToItsStoresOnly(t *testing.T) {
	tj := newTJ(trainingv1alpha1.FrameworkPyTorch, 2)
	tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{Labels: map[string]string{
		"team": "vision",
		commonv1alpha1.FeatureStoreBindingLabel("someone-elses"): "true",
	}}
	stores := []featureref.Store{{Name: "sales", SecretName: "sales-feast", Key: "k"}, {Name: "ads", SecretName: "ads-feast", Key: "k"}}
	obj, err := NewBackend(settings).Build(tj, 1, stores)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for k, v := range obj.(*batchv1.Job).Spec.Template.Labels {
		if commonv1alpha1.IsFeatureStoreBindingLabel(k) || k == "team" {
			got[k] = v
		}
	}
	want := map[string]string{
		"team":                                "vision",
		"bound.features.mlplatform.dev/sales": "true",
		"bound.features.mlplatform.dev/ads":   "true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod labels (-want +got):\n%s", diff)
	}
}
