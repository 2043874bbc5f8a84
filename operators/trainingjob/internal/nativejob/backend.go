package nativejob

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

// RolePods is the one role the native backend records in status.roles.
const RolePods = "Pods"

// Backend runs each run as one Indexed batch/v1 Job. The ranks of a run
// of several pods find each other by host name in the namespace's headless
// Service for the ranks, which package rankdns creates and publishes.
type Backend struct {
	settings  backend.Settings
	launchers map[trainingv1alpha1.Framework]launcher
}

var _ backend.Backend = (*Backend)(nil)

// NewBackend returns the native backend.
func NewBackend(s backend.Settings) *Backend {
	return &Backend{settings: s, launchers: launchers()}
}

// Name is native.
func (*Backend) Name() trainingv1alpha1.Backend { return trainingv1alpha1.BackendNative }

// Validate rejects what one pod template for every rank cannot run. The
// CRD rejects the same when spec.backend says native; this catches jobs
// that rely on the cluster's default backend.
func (b *Backend) Validate(tj *trainingv1alpha1.TrainingJob) error {
	if _, ok := b.launchers[tj.Spec.Framework]; !ok {
		return &backend.InvalidSpecError{Err: fmt.Errorf("framework %s is not supported by the native backend: use backend: kubeflow", tj.Spec.Framework)}
	}
	if tj.Spec.Framework == trainingv1alpha1.FrameworkTensorFlow && ptr.Deref(tj.Spec.ParameterServers, 0) > 0 {
		return &backend.InvalidSpecError{Err: fmt.Errorf("tensorflow with parameterServers needs heterogeneous pods, which the native backend cannot run: use backend: kubeflow")}
	}
	if tj.Spec.Framework == trainingv1alpha1.FrameworkPaddle && tj.Spec.Workers > 1 {
		return &backend.InvalidSpecError{Err: fmt.Errorf("paddle with more than one worker needs a rank-0 pod that differs from the others, which the native backend cannot run: use backend: kubeflow")}
	}
	return nil
}

// Reference names the Job of a run.
func (*Backend) Reference(tj *trainingv1alpha1.TrainingJob, run int32) trainingv1alpha1.JobReference {
	return trainingv1alpha1.JobReference{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job", Name: backend.JobName(tj.Name, run)}
}

// Empty returns an empty Job.
func (*Backend) Empty(*trainingv1alpha1.TrainingJob) client.Object { return &batchv1.Job{} }

// Owned lists Jobs.
func (*Backend) Owned() []client.Object { return []client.Object{&batchv1.Job{}} }

// SuspendPatch sets spec.suspend.
func (*Backend) SuspendPatch(suspend bool) client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend))
}

// Build returns the Indexed Job of a run: completions = parallelism = the
// ranks, rank i at completion index i with host name <job>-<i> in the
// subdomain of the namespace's headless Service for the ranks
// (rankdns.Service; a run of one pod has no peers and no subdomain). The
// Job never retries a pod
// (restartPolicy Never, backoffLimit 0): any failure ends the run, and the
// operator's failure classification decides whether the next run starts
// from the checkpoint. A job with a queue name is created suspended with
// Kueue's queue label, for Kueue to admit.
func (b *Backend) Build(tj *trainingv1alpha1.TrainingJob, run int32, stores []featureref.Store) (client.Object, error) {
	if err := b.Validate(tj); err != nil {
		return nil, err
	}
	l := b.launchers[tj.Spec.Framework]
	labels := backend.Labels(b.settings.OperatorName, tj.Name, run)
	template, err := backend.PodTemplate(tj, labels, l.container, l.port, stores, b.settings)
	if err != nil {
		return nil, err
	}
	topo := topologyOf(tj, run, l)
	template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if topo.pods > 1 {
		template.Spec.Subdomain = rankdns.Service
	}
	c := &template.Spec.Containers[0]
	env := l.env(topo)
	if err := backend.FitExec(env, execRemedy); err != nil {
		return nil, err
	}
	// The framework's variables come after the user's, so they win, as
	// on the kubeflow backend.
	c.Env = append(c.Env, env...)
	if tj.Spec.Checkpoint != nil {
		// One template serves every rank, so every pod mounts the volume.
		backend.AddCheckpoint(&template.Spec, tj, run, true)
	}
	meta := metav1.ObjectMeta{Namespace: tj.Namespace, Name: topo.job, Labels: backend.WithQueueLabel(labels, tj), Annotations: backend.WithQueueMark(nil, tj)}
	suspend := backend.Suspend(tj)
	spec := batchv1.JobSpec{
		CompletionMode:        ptr.To(batchv1.IndexedCompletion),
		Completions:           ptr.To(topo.pods),
		Parallelism:           ptr.To(topo.pods),
		BackoffLimit:          ptr.To[int32](0),
		ActiveDeadlineSeconds: tj.Spec.RunPolicy.ActiveDeadlineSeconds,
		Suspend:               ptr.To(suspend),
		Template:              template,
	}
	if l.shape != nil {
		l.shape(tj, topo, &spec)
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: meta,
		Spec:       spec,
	}, nil
}

// execRemedy is what to change when a framework variable would exceed
// what Linux passes a program (backend.FitExec). The check counts each
// value before the kubelet expands the completion index into it, which
// only shortens it.
const execRemedy = "use fewer workers, a shorter job name, or backend: kubeflow"

// Observe reads a Job. A run is Running once every rank is ready or has
// succeeded (every rank came up, which is when a distributed training has
// started); it
// succeeded once the Job met its success criteria, and failed as soon as
// the Job controller decided it failed (FailureTarget, before the pods are
// gone), with the times the Job recorded. Pod counts are recorded only when
// the run ended: recording each change would cost a status write each.
func (*Backend) Observe(child client.Object) backend.RunState {
	job, ok := child.(*batchv1.Job)
	if !ok {
		return backend.RunState{}
	}
	out := backend.RunState{SpecSuspended: ptr.Deref(job.Spec.Suspend, false), StartTime: job.Status.StartTime.DeepCopy()}
	out.Suspended = condition(job, batchv1.JobSuspended)
	// The Job controller records its decision (SuccessCriteriaMet,
	// FailureTarget) first and the terminal condition (Complete, with
	// completionTime, or Failed) once the pods are gone. The decision's
	// time is the end of the training, and reading it first gives the same
	// time whichever of the two status writes the operator happens to see
	// first; a Job of a cluster that writes only the terminal condition
	// gives that one's time, which then equals completionTime.
	out.Succeeded = firstOf(condition(job, batchv1.JobSuccessCriteriaMet), condition(job, batchv1.JobComplete))
	out.Failed = firstOf(condition(job, batchv1.JobFailureTarget), condition(job, batchv1.JobFailed))
	out.DeadlineExceeded = out.Failed != nil && out.Failed.Reason == batchv1.JobReasonDeadlineExceeded
	if out.Finished() {
		out.Roles = []trainingv1alpha1.RoleStatus{{Name: RolePods, Active: job.Status.Active, Succeeded: job.Status.Succeeded, Failed: job.Status.Failed}}
		return out
	}
	want := ptr.Deref(job.Spec.Parallelism, 1)
	// Ranks that already succeeded were running: a run whose ranks end one
	// by one stays Running, and the Job's count changes wake no reconcile.
	if !out.SpecSuspended && out.Suspended == nil && ptr.Deref(job.Status.Ready, 0)+job.Status.Succeeded >= want {
		out.Running = &backend.Transition{Reason: "Running", Message: fmt.Sprintf("Job %s: all %d pods are ready", job.Name, want)}
	}
	return out
}

func condition(job *batchv1.Job, t batchv1.JobConditionType) *backend.Transition {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &backend.Transition{Reason: c.Reason, Message: c.Message, Time: c.LastTransitionTime}
		}
	}
	return nil
}

func firstOf(ts ...*backend.Transition) *backend.Transition {
	for _, t := range ts {
		if t != nil {
			return t
		}
	}
	return nil
}
