package nativejob

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/mpi"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
)

// EnvCompletionIndex is the variable the Job controller sets to a pod's
// completion index. The operator defines it itself, first among the
// framework's variables, because the Job controller appends its own after
// every other variable and Kubernetes expands $(VAR) only from variables
// defined earlier; the Job controller keeps a definition that exists.
const EnvCompletionIndex = "JOB_COMPLETION_INDEX"

// completionIndex refers to the completion index inside another
// variable's value.
const completionIndex = "$(" + EnvCompletionIndex + ")"

// launcher is what differs between frameworks on the native backend: the
// container and port Kubeflow uses for them (so images and probes written
// for Kubeflow keep working) and the launcher's environment.
type launcher struct {
	container string
	port      corev1.ContainerPort
	env       func(t topology) []corev1.EnvVar
	// shape, when set, adjusts the Job further: framework mpi's launcher
	// and SSH servers.
	shape func(tj *trainingv1alpha1.TrainingJob, t topology, job *batchv1.JobSpec)
}

// topology is a run's ranks: its Job, namespace and pod count. Rank i
// runs as completion index i, host <job>-<i>.<rankdns.Service>.
type topology struct {
	job, namespace string
	pods           int32
	port           int32
	nprocPerNode   int32
}

// host is the stable name of rank i, resolvable in the namespace through
// the namespace's headless Service for the ranks (rankdns.Service), as
// Kubeflow's per-pod Service names are: the run's Job name makes it unique
// in the namespace. A run of one pod has no peers and publishes no name:
// its one rank reaches itself as localhost.
func (t topology) host(i int32) string {
	if t.pods <= 1 {
		return "localhost"
	}
	return fmt.Sprintf("%s-%d.%s", t.job, i, rankdns.Service)
}

// fqdn is host(i) with the namespace and .svc, for the frameworks whose
// resolvers (gRPC, Open MPI's ssh) are given the full name; localhost
// stays as it is.
func (t topology) fqdn(i int32) string {
	if t.pods <= 1 {
		return "localhost"
	}
	return fmt.Sprintf("%s.%s.svc", t.host(i), t.namespace)
}

// launchers are the frameworks the native backend runs, registered
// explicitly.
func launchers() map[trainingv1alpha1.Framework]launcher {
	return map[trainingv1alpha1.Framework]launcher{
		trainingv1alpha1.FrameworkPyTorch:    {kubeflowv1.PyTorchJobDefaultContainerName, port(kubeflowv1.PyTorchJobDefaultPortName, kubeflowv1.PyTorchJobDefaultPort), pytorchEnv, nil},
		trainingv1alpha1.FrameworkTensorFlow: {kubeflowv1.TFJobDefaultContainerName, port(kubeflowv1.TFJobDefaultPortName, kubeflowv1.TFJobDefaultPort), tensorflowEnv, nil},
		trainingv1alpha1.FrameworkXGBoost:    {kubeflowv1.XGBoostJobDefaultContainerName, port(kubeflowv1.XGBoostJobDefaultPortName, kubeflowv1.XGBoostJobDefaultPort), xgboostEnv, nil},
		trainingv1alpha1.FrameworkPaddle:     {kubeflowv1.PaddleJobDefaultContainerName, port(kubeflowv1.PaddleJobDefaultPortName, kubeflowv1.PaddleJobDefaultPort), paddleEnv, nil},
		trainingv1alpha1.FrameworkJAX:        {JAXContainerName, port(JAXPortName, JAXPort), jaxEnv, nil},
		trainingv1alpha1.FrameworkMPI:        {mpi.ContainerName, mpi.ContainerPort(), mpiEnv, mpiShape},
	}
}

// The JAX container and port. Training-operator v1.8 has no JAXJob; the
// container and port names are those of the JAXJob of later
// training-operator releases, and the port is the one Kubeflow Trainer's
// JAX runtime gives the coordinator.
const (
	JAXContainerName = "jax"
	JAXPortName      = "jaxjob-port"
	JAXPort          = 8899
)

func port(name string, number int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: number, Protocol: corev1.ProtocolTCP}
}

func value(name, v string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: v} }

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// indexVar defines the completion index for the variables that follow.
func indexVar() corev1.EnvVar {
	return corev1.EnvVar{Name: EnvCompletionIndex, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"},
	}}
}

// pytorchEnv is what Kubeflow gives every PyTorchJob pod with a Master:
// rank 0 (the Master) is the rendezvous point, Worker k is rank k+1, the
// world is pods*nprocPerNode processes, and torchrun reads the PET_*
// variables.
func pytorchEnv(t topology) []corev1.EnvVar {
	master := t.host(0)
	return []corev1.EnvVar{
		indexVar(),
		value("PYTHONUNBUFFERED", "1"),
		value("MASTER_PORT", itoa(t.port)),
		value("PET_MASTER_PORT", itoa(t.port)),
		value("MASTER_ADDR", master),
		value("PET_MASTER_ADDR", master),
		value("WORLD_SIZE", itoa(t.pods*t.nprocPerNode)),
		value("RANK", completionIndex),
		value("PET_NODE_RANK", completionIndex),
		value("PET_NPROC_PER_NODE", itoa(t.nprocPerNode)),
		value("PET_NNODES", itoa(t.pods)),
	}
}

// xgboostEnv is Kubeflow's XGBoostJob environment: the Master (rank 0) is
// the tracker, and WORKER_ADDRS lists the other ranks in rank order.
func xgboostEnv(t topology) []corev1.EnvVar {
	env := []corev1.EnvVar{
		indexVar(),
		value("MASTER_PORT", itoa(t.port)),
		value("MASTER_ADDR", t.host(0)),
		value("WORLD_SIZE", itoa(t.pods)),
		value("RANK", completionIndex),
		value("PYTHONUNBUFFERED", "1"),
	}
	if t.pods > 1 {
		workers := make([]string, 0, t.pods-1)
		for i := int32(1); i < t.pods; i++ {
			workers = append(workers, t.host(i))
		}
		env = append(env, value("WORKER_PORT", itoa(t.port)), value("WORKER_ADDRS", strings.Join(workers, ",")))
	}
	return env
}

// tensorflowEnv is a TF_CONFIG per index for MultiWorkerMirroredStrategy.
// Kubeflow lists a Chief and Workers; one pod template cannot make rank 0
// differ, so every rank is a worker, in the same order (Kubeflow's chief 0
// is worker 0 here, its worker k is worker k+1), and TensorFlow makes
// worker 0 the chief when the cluster has none. A single pod gets no
// TF_CONFIG, as with Kubeflow.
func tensorflowEnv(t topology) []corev1.EnvVar {
	if t.pods <= 1 {
		return nil
	}
	workers := make([]string, 0, t.pods)
	for i := int32(0); i < t.pods; i++ {
		workers = append(workers, fmt.Sprintf("%s:%d", t.fqdn(i), t.port))
	}
	// Written by hand around the marshalled host list, because the index
	// is a reference the kubelet expands into a JSON number, not JSON
	// itself; the key order is Kubeflow's.
	list, err := json.Marshal(workers)
	if err != nil {
		return nil
	}
	cfg := fmt.Sprintf(`{"cluster":{"worker":%s},"task":{"type":"worker","index":%s},"environment":"cloud"}`, list, completionIndex)
	return []corev1.EnvVar{indexVar(), value("TF_CONFIG", cfg)}
}

// jaxEnv is what Kubeflow Trainer's JAX runtime gives every process, read
// by jax.distributed.initialize: process 0 runs the coordinator, every
// pod is one process, and its process id is its completion index. The
// coordinator's name carries the namespace and .svc, as TF_CONFIG's hosts
// do, because gRPC resolves it.
func jaxEnv(t topology) []corev1.EnvVar {
	return []corev1.EnvVar{
		indexVar(),
		value("PYTHONUNBUFFERED", "1"),
		value("JAX_COORDINATOR_ADDRESS", fmt.Sprintf("%s:%d", t.fqdn(0), t.port)),
		value("JAX_COORDINATOR_PORT", itoa(t.port)),
		value("JAX_NUM_PROCESSES", itoa(t.pods)),
		value("JAX_PROCESS_ID", completionIndex),
	}
}

// paddleEnv is Kubeflow's PaddleJob environment in collective mode for a
// single pod, which is its own rendezvous point (its pod IP); the CRD
// sends paddle with more than one worker to the kubeflow backend, whose
// rank-0 pod differs from the others.
func paddleEnv(t topology) []corev1.EnvVar {
	return []corev1.EnvVar{
		value("PYTHONUNBUFFERED", "1"),
		value("PADDLE_JOB_ID", t.job),
		value("PADDLE_NNODES", itoa(t.pods)),
		{Name: "POD_IP_DUMMY", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		value("PADDLE_MASTER", fmt.Sprintf("$(POD_IP_DUMMY):%d", t.port)),
	}
}

// mpiEnv defines the completion index, by which the pod of index 0 becomes
// the launcher.
func mpiEnv(topology) []corev1.EnvVar { return []corev1.EnvVar{indexVar()} }

// mpiShape makes the Job an MPI job in the MPI Operator's shape, with the
// launcher running ranks itself (its runLauncherAsWorker): index 0 runs the
// user's command (mpirun) over a hostfile of every pod, the other indexes
// run SSH servers. The run succeeds when the launcher does (a success
// policy on index 0; the Job controller then ends the servers), and fails,
// as for every framework, when any pod fails.
func mpiShape(tj *trainingv1alpha1.TrainingJob, t topology, job *batchv1.JobSpec) {
	hosts := make([]string, 0, t.pods-1)
	for i := int32(1); i < t.pods; i++ {
		hosts = append(hosts, t.fqdn(i))
	}
	mpi.Apply(&job.Template.Spec, mpi.SecretName(tj.Name), "", mpi.Hostfile(hosts, tj.Spec.MPI.Slots()))
	job.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
}

// topologyOf is the topology of a run of tj.
func topologyOf(tj *trainingv1alpha1.TrainingJob, run int32, l launcher) topology {
	return topology{
		job:          backend.JobName(tj.Name, run),
		namespace:    tj.Namespace,
		pods:         tj.WorkerPods(),
		port:         l.port.ContainerPort,
		nprocPerNode: backend.NprocPerNode(&tj.Spec),
	}
}
