package kubeflowjob

import (
	"fmt"
	"maps"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/mpi"
)

// RoleShaper is implemented by frameworks whose roles need more than the
// common pod template, such as MPI's launcher and SSH servers.
type RoleShaper interface {
	ShapeRole(tj *trainingv1alpha1.TrainingJob, run int32, role Role, spec *corev1.PodSpec)
}

// mpiJob runs framework mpi as training-operator v1's MPIJob
// (kubeflow.org/v1, the one MPI version v1.8.1 serves): a Launcher and
// workers-1 Workers. Its own transport (kubectl exec from the launcher,
// with kubectl delivered by an init container) is not used: the launcher
// starts ranks over the operator's SSH, exactly as on the native backend,
// and runs ranks itself, so workers counts the same pods on both backends.
// The workers become resolvable through the run's headless Service (a
// companion) named as the pods' subdomain.
type mpiJob struct{}

var (
	_ Framework  = mpiJob{}
	_ RoleShaper = mpiJob{}
)

// mpiWorkerSuffix is what training-operator v1 appends to an MPIJob's name,
// with the index, to name its worker pods.
const mpiWorkerSuffix = "-worker"

func (mpiJob) Kind() string { return kubeflowv1.MPIJobKind }

func (mpiJob) Container() (string, corev1.ContainerPort) {
	return mpi.ContainerName, mpi.ContainerPort()
}

func (mpiJob) Roles(spec *trainingv1alpha1.TrainingJobSpec) []Role {
	return leaderAndWorkers(kubeflowv1.MPIJobReplicaTypeLauncher, kubeflowv1.MPIJobReplicaTypeWorker, spec.Workers)
}

func (mpiJob) New(meta metav1.ObjectMeta, spec *trainingv1alpha1.TrainingJobSpec, rp kubeflowv1.RunPolicy, replicas map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) client.Object {
	return &kubeflowv1.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv1.GroupVersion.String(), Kind: kubeflowv1.MPIJobKind},
		ObjectMeta: meta,
		Spec: kubeflowv1.MPIJobSpec{
			SlotsPerWorker:  ptr.To(spec.MPI.Slots()),
			MainContainer:   mpi.ContainerName,
			RunPolicy:       rp,
			MPIReplicaSpecs: replicas,
		},
	}
}

func (mpiJob) Empty() client.Object { return &kubeflowv1.MPIJob{} }

func (mpiJob) Parts(obj client.Object) (*kubeflowv1.RunPolicy, *kubeflowv1.JobStatus) {
	j := obj.(*kubeflowv1.MPIJob)
	return &j.Spec.RunPolicy, &j.Status
}

// ShapeRole gives the launcher the hostfile of every worker pod and the
// workers their SSH server; both join the run's headless Service as their
// subdomain.
func (mpiJob) ShapeRole(tj *trainingv1alpha1.TrainingJob, run int32, role Role, spec *corev1.PodSpec) {
	job := backend.JobName(tj.Name, run)
	spec.Subdomain = job
	if role.Type != kubeflowv1.MPIJobReplicaTypeLauncher {
		mpi.Apply(spec, mpi.SecretName(tj.Name), mpi.RoleWorker, "")
		return
	}
	hosts := make([]string, 0, tj.WorkerPods()-1)
	for i := range tj.WorkerPods() - 1 {
		hosts = append(hosts, fmt.Sprintf("%s%s-%d.%s.%s.svc", job, mpiWorkerSuffix, i, job, tj.Namespace))
	}
	mpi.Apply(spec, mpi.SecretName(tj.Name), mpi.RoleLauncher, mpi.Hostfile(hosts, tj.Spec.MPI.Slots()))
}

// mpiService is the headless Service that makes an MPIJob's pods
// resolvable by name (training-operator v1 creates none for MPIJob). It
// publishes pods before they are ready, because the launcher must reach
// the workers for the run to start.
func mpiService(tj *trainingv1alpha1.TrainingJob, run int32, s backend.Settings) *corev1.Service {
	labels := backend.Labels(s.OperatorName, tj.Name, run)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: backend.JobName(tj.Name, run), Labels: labels},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 maps.Clone(labels),
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: "ssh", Port: mpi.Port, Protocol: corev1.ProtocolTCP}},
		},
	}
}
