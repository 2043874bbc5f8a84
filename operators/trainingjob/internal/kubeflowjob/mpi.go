package kubeflowjob

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

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
// training-operator v1 gives MPI worker pods no hostname, so no DNS name
// follows from their pod names: each worker becomes resolvable through a
// headless Service of its own (a companion) named as its pod.
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

// ShapeRole gives the launcher the hostfile of every worker pod, by the
// names of their Services, and the workers their SSH server.
func (mpiJob) ShapeRole(tj *trainingv1alpha1.TrainingJob, run int32, role Role, spec *corev1.PodSpec) {
	if role.Type != kubeflowv1.MPIJobReplicaTypeLauncher {
		mpi.Apply(spec, mpi.SecretName(tj.Name), mpi.RoleWorker, "")
		return
	}
	hosts := make([]string, 0, tj.WorkerPods()-1)
	for i := range tj.WorkerPods() - 1 {
		hosts = append(hosts, fmt.Sprintf("%s.%s.svc", mpiWorkerName(tj.Name, run, i), tj.Namespace))
	}
	mpi.Apply(spec, mpi.SecretName(tj.Name), mpi.RoleLauncher, mpi.Hostfile(hosts, tj.Spec.MPI.Slots()))
}

// mpiWorkerName is training-operator v1's name of worker i's pod, which
// its Service shares. The CRD bounds the TrainingJob's name and workers so
// that it is a DNS label.
func mpiWorkerName(name string, run, i int32) string {
	return fmt.Sprintf("%s%s-%d", backend.JobName(name, run), mpiWorkerSuffix, i)
}

// mpiServices are the headless Services that make an MPIJob's workers
// resolvable by name (training-operator v1 creates none for MPIJob), one
// per worker, selecting it by the replica labels training-operator v1
// gives it. They publish pods before they are ready, because the launcher
// must reach the workers for the run to start.
func mpiServices(tj *trainingv1alpha1.TrainingJob, run int32, s backend.Settings) []client.Object {
	labels := backend.Labels(s.OperatorName, tj.Name, run)
	out := make([]client.Object, 0, tj.WorkerPods()-1)
	for i := range tj.WorkerPods() - 1 {
		selector := maps.Clone(labels)
		selector[kubeflowv1.ReplicaTypeLabel] = strings.ToLower(string(kubeflowv1.MPIJobReplicaTypeWorker))
		selector[kubeflowv1.ReplicaIndexLabel] = strconv.Itoa(int(i))
		out = append(out, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: mpiWorkerName(tj.Name, run, i), Labels: labels},
			Spec: corev1.ServiceSpec{
				ClusterIP:                corev1.ClusterIPNone,
				Selector:                 selector,
				PublishNotReadyAddresses: true,
				Ports:                    []corev1.ServicePort{{Name: "ssh", Port: mpi.Port, Protocol: corev1.ProtocolTCP}},
			},
		})
	}
	return out
}
