package kubeflowjob

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

// Backend runs each run as a Kubeflow training-operator v1 job.
type Backend struct {
	settings   backend.Settings
	frameworks map[trainingv1alpha1.Framework]Framework
	// mu guards missing: why each job kind whose CRD is not served cannot
	// be used, keyed by kind. It starts with the kinds not served when the
	// operator started; a kind is taken out when its CRD appears while the
	// operator runs, and put back when its CRD is deleted.
	mu      sync.RWMutex
	missing map[string]error
}

var (
	_ backend.Backend      = (*Backend)(nil)
	_ backend.Availability = (*Backend)(nil)
	_ backend.Companions   = (*Backend)(nil)
)

// NewBackend returns the Kubeflow backend. missing holds, by kind, the job
// kinds whose CRDs were not served when the operator started: jobs of
// those kinds are Stalled with its message, and nothing watches the kinds
// until their CRDs appear (MarkInstalled); the other kinds run. A cluster
// may serve only some kinds, such as the MPI Operator's v2beta1 MPIJob
// beside the training-operator's other kinds.
func NewBackend(s backend.Settings, missing map[string]error) *Backend {
	return &Backend{settings: s, frameworks: Frameworks(), missing: maps.Clone(missing)}
}

// Name is kubeflow.
func (*Backend) Name() trainingv1alpha1.Backend { return trainingv1alpha1.BackendKubeflow }

// Available is nil when the CRD of tj's job kind is served (or tj's
// framework has no kind, which Validate explains).
func (b *Backend) Available(tj *trainingv1alpha1.TrainingJob) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.missing[b.JobKind(tj)]
}

// JobKind is the Kubeflow kind of tj's jobs, such as PyTorchJob; empty
// when its framework has none.
func (b *Backend) JobKind(tj *trainingv1alpha1.TrainingJob) string {
	if fw, ok := b.frameworks[tj.Spec.Framework]; ok {
		return fw.Kind()
	}
	return ""
}

// Missing lists the job kinds whose CRDs are not served.
func (b *Backend) Missing() []client.Object {
	return b.kinds(func(kind string) bool { return b.missing[kind] != nil })
}

// Served lists the job kinds whose CRDs are served.
func (b *Backend) Served() []client.Object {
	return b.kinds(func(kind string) bool { return b.missing[kind] == nil })
}

// MarkInstalled records that the CRD of kind (such as PyTorchJob) appeared
// after the operator started, or came back, and the kind is now watched.
func (b *Backend) MarkInstalled(kind string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.missing, kind)
}

// MarkMissing records that the CRD of kind is no longer served while the
// operator runs (deleted, or being deleted), with why: jobs of kind are
// Stalled with it until MarkInstalled.
func (b *Backend) MarkMissing(kind string, why error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.missing == nil {
		b.missing = map[string]error{}
	}
	b.missing[kind] = why
}

// kinds lists an empty job of each kind that match, in a stable order.
func (b *Backend) kinds(match func(kind string) bool) []client.Object {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]client.Object, 0, len(b.frameworks))
	for _, fw := range b.frameworks {
		if match(fw.Kind()) {
			out = append(out, fw.Empty())
		}
	}
	slices.SortFunc(out, func(x, y client.Object) int { return strings.Compare(fmt.Sprintf("%T", x), fmt.Sprintf("%T", y)) })
	return out
}

// Validate rejects what this backend cannot run: a framework
// training-operator v1.8 has no kind for (jax), and a queued MPI job, which
// nothing would ever admit: Kueue v0.17's kubeflow.org/mpijob integration
// manages the MPI Operator's kubeflow.org/v2beta1 MPIJob, not the
// training-operator's kubeflow.org/v1 MPIJob this backend creates. The CRD
// rejects the same when spec.backend says kubeflow; this catches jobs that
// rely on the cluster's default backend.
func (b *Backend) Validate(tj *trainingv1alpha1.TrainingJob) error {
	if _, ok := b.frameworks[tj.Spec.Framework]; !ok {
		return &backend.InvalidSpecError{Err: fmt.Errorf("framework %s has no Kubeflow training-operator v1.8 job kind, so the kubeflow backend cannot run it: use backend: native", tj.Spec.Framework)}
	}
	if tj.Spec.Framework == trainingv1alpha1.FrameworkMPI && tj.Spec.QueueName != "" {
		return &backend.InvalidSpecError{Err: errors.New(queuedMPIMessage)}
	}
	return nil
}

// queuedMPIMessage explains why a queued MPI job cannot run on this
// backend, as the CRD's rule does.
const queuedMPIMessage = "framework mpi with queueName cannot run on the kubeflow backend: Kueue's kubeflow.org/mpijob integration admits only the MPI Operator's kubeflow.org/v2beta1 MPIJob, " +
	"not the training-operator's kubeflow.org/v1 MPIJob this backend creates, so nothing would ever admit it: use backend: native (Kueue admits its batch/v1 Job), or remove queueName"

// Reference names the Kubeflow job of a run.
func (b *Backend) Reference(tj *trainingv1alpha1.TrainingJob, run int32) trainingv1alpha1.JobReference {
	return trainingv1alpha1.JobReference{APIVersion: kubeflowv1.GroupVersion.String(), Kind: b.frameworks[tj.Spec.Framework].Kind(), Name: backend.JobName(tj.Name, run)}
}

// Empty returns an empty job of tj's framework.
func (b *Backend) Empty(tj *trainingv1alpha1.TrainingJob) client.Object {
	return b.frameworks[tj.Spec.Framework].Empty()
}

// Build translates a run of tj.
func (b *Backend) Build(tj *trainingv1alpha1.TrainingJob, run int32, stores []featureref.Store) (client.Object, error) {
	return Build(b.frameworks[tj.Spec.Framework], tj, run, stores, b.settings)
}

// Companions are the headless Services of an MPI run's workers, which
// name them; the other Kubeflow kinds get their Services from Kubeflow.
func (b *Backend) Companions(tj *trainingv1alpha1.TrainingJob, run int32) []client.Object {
	if tj.Spec.Framework != trainingv1alpha1.FrameworkMPI {
		return nil
	}
	return mpiServices(tj, run, b.settings)
}

// SuspendPatch sets runPolicy.suspend.
func (*Backend) SuspendPatch(suspend bool) client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"runPolicy":{"suspend":%t}}}`, suspend))
}

// Owned lists the job kinds of every framework.
func (b *Backend) Owned() []client.Object {
	return b.kinds(func(string) bool { return true })
}

// deadlineMessage is how the training-operator's Failed condition says
// that the job was active longer than runPolicy.activeDeadlineSeconds
// (v1.9: "Job <name> has failed because it was active longer than
// specified deadline"); its reason is the same as for any failure.
const deadlineMessage = "active longer than specified deadline"

// Observe reads a Kubeflow job's run policy and status.
func (b *Backend) Observe(child client.Object) backend.RunState {
	rp, st := partsOf(child)
	out := backend.RunState{SpecSuspended: rp.Suspend != nil && *rp.Suspend, StartTime: st.StartTime.DeepCopy()}
	out.Suspended = transition(st, kubeflowv1.JobSuspended)
	out.Running = transition(st, kubeflowv1.JobRunning)
	out.Restarting = transition(st, kubeflowv1.JobRestarting)
	out.Succeeded = transition(st, kubeflowv1.JobSucceeded)
	out.Failed = transition(st, kubeflowv1.JobFailed)
	out.DeadlineExceeded = out.Failed != nil && strings.Contains(out.Failed.Message, deadlineMessage)
	// The completion time Kubeflow records is the terminal time; the
	// condition's transition time stands in when it is missing.
	for _, t := range []*backend.Transition{out.Succeeded, out.Failed} {
		if t != nil && st.CompletionTime != nil {
			t.Time = *st.CompletionTime
		}
	}
	// Pod counts are recorded only once the run ended, as on the native
	// backend: Kubeflow changes them with every pod that starts or ends,
	// and recording each change would cost a status write each (and a
	// reconcile, since the child watch passes what Observe changes).
	if out.Finished() {
		out.Roles = roleStatuses(st)
	}
	return out
}

// partsOf returns the run policy and status of any Kubeflow job kind; an
// object of another type reads as a job that reports nothing.
func partsOf(child client.Object) (*kubeflowv1.RunPolicy, *kubeflowv1.JobStatus) {
	switch j := child.(type) {
	case *kubeflowv1.PyTorchJob:
		return &j.Spec.RunPolicy, &j.Status
	case *kubeflowv1.TFJob:
		return &j.Spec.RunPolicy, &j.Status
	case *kubeflowv1.XGBoostJob:
		return &j.Spec.RunPolicy, &j.Status
	case *kubeflowv1.PaddleJob:
		return &j.Spec.RunPolicy, &j.Status
	case *kubeflowv1.MPIJob:
		return &j.Spec.RunPolicy, &j.Status
	default:
		return &kubeflowv1.RunPolicy{}, &kubeflowv1.JobStatus{}
	}
}

func transition(st *kubeflowv1.JobStatus, t kubeflowv1.JobConditionType) *backend.Transition {
	for _, c := range st.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &backend.Transition{Reason: c.Reason, Message: c.Message, Time: c.LastTransitionTime}
		}
	}
	return nil
}

// roleStatuses counts the pods of each replica type. Replica types whose
// counts are all zero are left out: they say nothing.
func roleStatuses(s *kubeflowv1.JobStatus) []trainingv1alpha1.RoleStatus {
	var out []trainingv1alpha1.RoleStatus
	for role, rs := range s.ReplicaStatuses {
		if rs == nil || rs.Active == 0 && rs.Succeeded == 0 && rs.Failed == 0 {
			continue
		}
		out = append(out, trainingv1alpha1.RoleStatus{Name: string(role), Active: rs.Active, Succeeded: rs.Succeeded, Failed: rs.Failed})
	}
	slices.SortFunc(out, func(a, b trainingv1alpha1.RoleStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}
