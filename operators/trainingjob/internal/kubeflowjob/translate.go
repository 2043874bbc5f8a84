package kubeflowjob

import (
	"strconv"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

// Build returns the Kubeflow job for a run of tj, with stores mounted. It
// is deterministic: the same inputs always give the same object, so an
// operator upgrade that keeps the translation never restarts a job (the
// golden files pin it). The job keeps Kubeflow's clean-pod policy None and
// no TTL: the operator applies the user's policies itself once it has
// recorded the outcome, so failed pods remain readable until then.
//
// Every replica has restart policy Never, as on the native backend: a pod
// that fails ends the run (Kubeflow marks the job Failed instead of
// restarting the pod in place), and the operator's failure classification
// decides whether a next run starts. With OnFailure a user error (exit 1)
// restarted in place forever, and an infrastructure failure was retried by
// Kubeflow outside the checkpoint's restart budget. runPolicy.backoffLimit
// is therefore not passed on: Kubeflow counts it only for pods it restarts.
//
// A job with a checkpoint gets the checkpoint volume and the environment
// contract (see trainingv1alpha1.Checkpoint), with the restart count that
// tj's status recorded before this run was decided. A job with a queue
// name is created suspended with Kueue's queue label, for Kueue to admit.
// Jobs without either are generated exactly as before these existed.
func Build(fw Framework, tj *trainingv1alpha1.TrainingJob, run int32, stores []featureref.Store, s backend.Settings) (client.Object, error) {
	if e, ok := fw.(ExecEnv); ok {
		if err := backend.FitExec(e.ExecEnv(tj, run), execRemedy); err != nil {
			return nil, err
		}
	}
	labels := backend.Labels(s.OperatorName, tj.Name, run)
	name, p := fw.Container()
	template, err := backend.PodTemplate(tj, labels, name, p, stores, s)
	if err != nil {
		return nil, err
	}

	replicas := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}
	for i, role := range fw.Roles(&tj.Spec) {
		rs := &kubeflowv1.ReplicaSpec{
			Replicas:      ptr.To(role.Replicas),
			Template:      *template.DeepCopy(),
			RestartPolicy: kubeflowv1.RestartPolicyNever,
		}
		if shaper, ok := fw.(RoleShaper); ok {
			shaper.ShapeRole(tj, run, role, &rs.Template.Spec)
		}
		if cp := tj.Spec.Checkpoint; cp != nil {
			// The first role holds rank 0 (Master, Chief, or paddle's
			// only Worker); a ReadWriteOnce volume attaches to one node,
			// so only that role mounts it.
			mount := i == 0 || cp.AccessMode == corev1.ReadWriteMany
			backend.AddCheckpoint(&rs.Template.Spec, tj, run, mount)
		}
		replicas[role.Type] = rs
	}
	runPolicy := kubeflowv1.RunPolicy{
		CleanPodPolicy:        ptr.To(kubeflowv1.CleanPodPolicyNone),
		ActiveDeadlineSeconds: tj.Spec.RunPolicy.ActiveDeadlineSeconds,
		Suspend:               ptr.To(backend.Suspend(tj)),
	}
	meta := metav1.ObjectMeta{
		Namespace:   tj.Namespace,
		Name:        backend.JobName(tj.Name, run),
		Labels:      backend.WithQueueLabel(labels, tj),
		Annotations: backend.WithQueueMark(nil, tj),
	}
	return fw.New(meta, &tj.Spec, runPolicy, replicas), nil
}

// execRemedy is what to change when the training-operator's framework
// variable would exceed what Linux passes a program (backend.FitExec).
const execRemedy = "use fewer workers or parameter servers, a shorter job name, or a namespace with a shorter name"

// nprocPerNode is the number of processes per pytorch pod, always set so
// that the Kubeflow defaulter ("auto") never changes what a job runs with.
func nprocPerNode(spec *trainingv1alpha1.TrainingJobSpec) *string {
	return ptr.To(strconv.Itoa(int(backend.NprocPerNode(spec))))
}
