package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// Framework is the training framework a TrainingJob runs with. It decides
// the Kubeflow job kind and the roles of its pods.
// +kubebuilder:validation:Enum=pytorch;tensorflow;xgboost;paddle;jax;mpi
type Framework string

// The supported frameworks.
const (
	FrameworkPyTorch    Framework = "pytorch"
	FrameworkTensorFlow Framework = "tensorflow"
	FrameworkXGBoost    Framework = "xgboost"
	FrameworkPaddle     Framework = "paddle"
	// FrameworkJAX runs only on the native backend: training-operator
	// v1.8 has no JAXJob.
	FrameworkJAX Framework = "jax"
	// FrameworkMPI runs an MPI program the way the MPI Operator does: a
	// launcher runs the job's command (typically mpirun) over the workers
	// through SSH, with a key pair the operator generates.
	FrameworkMPI Framework = "mpi"
)

// MaxMPIWorkers bounds the workers of framework mpi: the launcher gets the
// hostfile in one environment variable, which Linux limits to 128KiB.
const MaxMPIWorkers = 512

// Backend is the engine that runs a TrainingJob's runs.
// +kubebuilder:validation:Enum=native;kubeflow
type Backend string

const (
	// BackendNative runs each run as one Indexed batch/v1 Job with a
	// headless Service that gives every rank a stable host name. It needs
	// nothing but Kubernetes, and Kueue admits it through its batch/Job
	// integration.
	BackendNative Backend = "native"
	// BackendKubeflow runs each run as a Kubeflow training-operator v1 job
	// (PyTorchJob, TFJob, XGBoostJob, PaddleJob); the Kubeflow CRDs and
	// training-operator must be installed.
	BackendKubeflow Backend = "kubeflow"
)

// CleanPodPolicy says which pods of a finished run are deleted once the
// operator has recorded the outcome.
// +kubebuilder:validation:Enum=All;Running;None
type CleanPodPolicy string

const (
	// CleanPodPolicyAll deletes every pod, keeping nothing but the status.
	CleanPodPolicyAll CleanPodPolicy = "All"
	// CleanPodPolicyRunning deletes pods that still run or wait (parameter
	// servers, stragglers) and keeps finished pods for their logs.
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	// CleanPodPolicyNone keeps every pod.
	CleanPodPolicyNone CleanPodPolicy = "None"
)

// TrainingJobSpec is what the user asks for. Everything that shapes the pods
// is immutable: a change could only take effect by restarting the training,
// which must be an explicit decision rather than a side effect of an edit.
//
// +kubebuilder:validation:XValidation:rule="!has(self.nprocPerNode) || self.framework == 'pytorch'",message="nprocPerNode is only supported with framework pytorch"
// +kubebuilder:validation:XValidation:rule="!has(self.parameterServers) || self.framework == 'tensorflow'",message="parameterServers is only supported with framework tensorflow"
// +kubebuilder:validation:XValidation:rule="self.framework != 'xgboost' || self.workers >= 2",message="framework xgboost needs workers of at least 2 (one master and at least one worker)"
// +kubebuilder:validation:XValidation:rule="!has(self.mpi) || self.framework == 'mpi'",message="mpi is only supported with framework mpi"
// +kubebuilder:validation:XValidation:rule="self.framework != 'mpi' || (has(self.command) && size(self.command) > 0)",message="framework mpi needs command: the launcher runs it over the workers, such as [mpirun, python3, train.py]; the workers run the operator's SSH server instead of the image's entrypoint"
// +kubebuilder:validation:XValidation:rule="self.framework != 'mpi' || self.workers <= 512",message="framework mpi supports at most 512 workers: the launcher receives the hostfile in its environment"
// +kubebuilder:validation:XValidation:rule="self.framework != 'mpi' || !has(self.checkpoint) || self.checkpoint.accessMode != 'ReadWriteOnce' || self.workers <= 1",message="framework mpi with more than one worker needs checkpoint.accessMode ReadWriteMany: every rank may write, and a ReadWriteOnce volume attaches to one node"
// +kubebuilder:validation:XValidation:rule="has(self.mpi) == has(oldSelf.mpi) && (!has(self.mpi) || self.mpi == oldSelf.mpi)",message="mpi is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.command) == has(oldSelf.command) && (!has(self.command) || self.command == oldSelf.command)",message="command is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.args) == has(oldSelf.args) && (!has(self.args) || self.args == oldSelf.args)",message="args is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.env) == has(oldSelf.env) && (!has(self.env) || self.env == oldSelf.env)",message="env is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.workingDir) == has(oldSelf.workingDir) && (!has(self.workingDir) || self.workingDir == oldSelf.workingDir)",message="workingDir is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.nprocPerNode) == has(oldSelf.nprocPerNode) && (!has(self.nprocPerNode) || self.nprocPerNode == oldSelf.nprocPerNode)",message="nprocPerNode is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.parameterServers) == has(oldSelf.parameterServers) && (!has(self.parameterServers) || self.parameterServers == oldSelf.parameterServers)",message="parameterServers is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.resources) == has(oldSelf.resources) && (!has(self.resources) || self.resources == oldSelf.resources)",message="resources is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.template) == has(oldSelf.template) && (!has(self.template) || self.template == oldSelf.template)",message="template is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.sharedMemory) == has(oldSelf.sharedMemory) && (!has(self.sharedMemory) || self.sharedMemory == oldSelf.sharedMemory)",message="sharedMemory is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.featureStores) == has(oldSelf.featureStores) && (!has(self.featureStores) || self.featureStores == oldSelf.featureStores)",message="featureStores is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.checkpoint) == has(oldSelf.checkpoint) && (!has(self.checkpoint) || self.checkpoint == oldSelf.checkpoint)",message="checkpoint is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.checkpoint) || self.checkpoint.accessMode != 'ReadWriteOnce' || self.framework != 'paddle' || self.workers <= 1",message="framework paddle with more than one worker needs checkpoint.accessMode ReadWriteMany: its workers share one pod template, so no single rank-0 pod can mount a ReadWriteOnce volume"
// +kubebuilder:validation:XValidation:rule="(has(self.runPolicy) && has(self.runPolicy.activeDeadlineSeconds)) == (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.activeDeadlineSeconds))",message="runPolicy.activeDeadlineSeconds is immutable: it can be neither added to nor removed from an existing job; create the job again with the deadline it needs"
// +kubebuilder:validation:XValidation:rule="(has(self.runPolicy) && has(self.runPolicy.backoffLimit)) == (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.backoffLimit))",message="runPolicy.backoffLimit is immutable: it can be neither added to nor removed from an existing job"
// +kubebuilder:validation:XValidation:rule="has(self.backend) == has(oldSelf.backend) && (!has(self.backend) || self.backend == oldSelf.backend)",message="backend is immutable; to move a job to another backend, create it again"
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'native' || self.framework != 'tensorflow' || !has(self.parameterServers) || self.parameterServers == 0",message="tensorflow with parameterServers needs heterogeneous pods, which the native backend cannot run: use backend: kubeflow"
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'native' || self.framework != 'paddle' || self.workers <= 1",message="paddle with more than one worker needs a rank-0 pod that differs from the others (its own address as PADDLE_MASTER), which the native backend cannot run: use backend: kubeflow"
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'kubeflow' || self.framework != 'jax'",message="framework jax has no Kubeflow training-operator v1.8 job kind (no JAXJob), so the kubeflow backend cannot run it: use backend: native"
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'kubeflow' || self.framework != 'mpi' || !has(self.queueName)",message="framework mpi with queueName cannot run on the kubeflow backend: Kueue's kubeflow.org/mpijob integration admits only the MPI Operator's kubeflow.org/v2beta1 MPIJob, not the training-operator's kubeflow.org/v1 MPIJob this backend creates, so nothing would ever admit it: use backend: native (Kueue admits its batch/v1 Job), or remove queueName"
// +kubebuilder:validation:XValidation:rule="!has(self.checkpoint) || !has(self.env) || self.env.all(e, !e.name.startsWith('MLPLATFORM_'))",message="env names starting with MLPLATFORM_ are reserved for the checkpoint contract"
// +kubebuilder:validation:XValidation:rule="!has(self.checkpoint) || !has(self.template) || !has(self.template.volumes) || self.template.volumes.all(v, v.name != 'checkpoint')",message="volume name checkpoint is reserved for the checkpoint volume"
// +kubebuilder:validation:XValidation:rule="!has(self.checkpoint) || !has(self.template) || !has(self.template.volumeMounts) || self.template.volumeMounts.all(m, m.mountPath != self.checkpoint.mountPath)",message="checkpoint.mountPath is already used by template.volumeMounts"
type TrainingJobSpec struct {
	// Framework selects the launcher environment and, on the kubeflow
	// backend, the Kubeflow job kind: pytorch (PyTorchJob), tensorflow
	// (TFJob), xgboost (XGBoostJob), paddle (PaddleJob), mpi (MPIJob) or
	// jax (native backend only: JAX_COORDINATOR_ADDRESS,
	// JAX_COORDINATOR_PORT, JAX_NUM_PROCESSES and JAX_PROCESS_ID, as
	// Kubeflow Trainer's JAX runtime sets them).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="framework is immutable"
	Framework Framework `json:"framework"`

	// Backend is the engine that runs the job: native (one Indexed
	// batch/v1 Job per run and a headless Service; nothing else needs to be
	// installed) or kubeflow (one Kubeflow training-operator v1 job per
	// run). Unset means the cluster's default, chosen by the platform team
	// in the operator's chart (defaultBackend) and recorded in
	// status.backend at the job's first reconcile. The training container
	// gets the same framework environment on both backends, so the same
	// image runs unchanged. Immutable.
	// +optional
	Backend Backend `json:"backend,omitempty"`

	// Image of the training container.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="image is immutable"
	Image string `json:"image"`

	// Command overrides the image's entrypoint.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	// +optional
	Command []string `json:"command,omitempty"`

	// Args are the arguments to the command.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// Env sets environment variables of the training container. The
	// framework's own variables (MASTER_ADDR, TF_CONFIG...) are set by the
	// backend and win over these.
	// +kubebuilder:validation:MaxItems=128
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// WorkingDir of the training container.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	WorkingDir string `json:"workingDir,omitempty"`

	// Workers is the number of pods (nodes) taking part in the training,
	// including the pod that plays the framework's coordinating role:
	// pytorch and xgboost run one Master and workers-1 Workers, tensorflow
	// one Chief and workers-1 Workers (plus parameterServers), paddle
	// workers Workers, jax one process per pod (process 0 the
	// coordinator), mpi one launcher (which also runs ranks) and
	// workers-1 workers.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="workers must be at least 1"
	// +kubebuilder:validation:XValidation:rule="self <= 1024",message="workers must be at most 1024"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workers is immutable"
	// +optional
	Workers int32 `json:"workers,omitempty"`

	// NprocPerNode is the number of training processes per pod (pytorch
	// only), typically one per accelerator.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	NprocPerNode *int32 `json:"nprocPerNode,omitempty"`

	// ParameterServers is the number of parameter server pods (tensorflow
	// only). Zero means none, as for MultiWorkerMirroredStrategy.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	ParameterServers *int32 `json:"parameterServers,omitempty"`

	// MPI configures framework mpi.
	// +optional
	MPI *MPISpec `json:"mpi,omitempty"`

	// Resources of each pod's training container, with its accelerators.
	// The accelerator type is mapped to a device resource name and node
	// labels by the platform team's configuration.
	// +optional
	Resources *commonv1alpha1.Resources `json:"resources,omitempty"`

	// Template adjusts the generated pods: volumes, scheduling and
	// identity. Everything else about the pods is generated.
	// +optional
	Template *PodTemplatePatch `json:"template,omitempty"`

	// SharedMemory configures the memory-backed /dev/shm that every pod
	// gets by default; PyTorch data loaders exchange batches through it and
	// the container runtime's 64Mi default is too small for them.
	// +optional
	SharedMemory *SharedMemory `json:"sharedMemory,omitempty"`

	// RunPolicy bounds the run and says what happens after it.
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// Suspend stops the job: its pods are deleted and come back when
	// suspend is set to false again. The training restarts from its own
	// checkpoints, if it writes any. Without queueName the current run's
	// Kubeflow job is suspended in place. With queueName, suspending is
	// Kueue's to do on the Kubeflow job, so the operator instead ends the
	// current run (it deletes that run's Kubeflow job, which gives its
	// quota back to Kueue) and, once suspend is false again, starts the
	// next run, which queues again; that run is not counted as a restart.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// QueueName is the Kueue LocalQueue the job is submitted to. The
	// Kubeflow job of each run carries it as the kueue.x-k8s.io/queue-name
	// label and is created suspended: Kueue admits it by unsuspending it
	// (possibly adding nodeSelector and tolerations, which the operator
	// keeps), and may evict it by suspending it again, which puts the
	// TrainingJob back to Queued without counting a restart. It can change
	// only while the job waits in its queue (Queued=True) or before its
	// first run was created, because Kueue does not move admitted
	// workloads. A kueue.x-k8s.io/priority-class label on the TrainingJob
	// (a Kueue WorkloadPriorityClass) is copied to each run's job, for
	// Kueue to order and preempt by. When it is empty in a namespace with a
	// LocalQueue named default, Kueue puts the job in that LocalQueue, and
	// the job waits there as if it named it. When it is removed while the
	// job waits, the job leaves Kueue (its Workload is deleted), or moves to
	// the default LocalQueue where there is one.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	QueueName string `json:"queueName,omitempty"`

	// Checkpoint gives the job a persistent volume for checkpoints and lets
	// the operator restart it from them after an infrastructure failure.
	// +optional
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`

	// FeatureStores are FeatureStores in this namespace whose Feast client
	// configuration is mounted into every pod. The job waits until each is
	// Ready.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	FeatureStores []commonv1alpha1.FeatureStoreReference `json:"featureStores,omitempty"`
}

// MPISpec shapes an MPI job: the launcher/worker layout of the MPI
// Operator. The launcher runs spec.command (typically mpirun) with a
// hostfile that lists every pod, itself included, with slotsPerWorker
// slots each, so a plain `mpirun python3 train.py` starts
// workers*slotsPerWorker ranks. The other pods run an SSH server as the
// pods' non-root user on port 2222; the launcher reaches them with a key
// pair the operator generates into a Secret <name>-mpi-ssh owned by the
// TrainingJob. Remote ranks get their own pod's environment. The image
// needs Open MPI, OpenSSH (client and server), /bin/sh, and a passwd entry
// with a login shell for the pods' user id (the platform's runAsUser).
type MPISpec struct {
	// SlotsPerWorker is the number of MPI ranks each pod runs, typically
	// one per accelerator. Default 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +optional
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`
}

// Slots is the number of ranks per pod of framework mpi: slotsPerWorker,
// else 1.
func (s *MPISpec) Slots() int32 {
	if s == nil || s.SlotsPerWorker == nil {
		return 1
	}
	return *s.SlotsPerWorker
}

// ResumePolicy says whether failed runs are restarted.
// +kubebuilder:validation:Enum=Auto;Never
type ResumePolicy string

const (
	// ResumeAuto starts a new run after an infrastructure failure, up to
	// maxRestarts times.
	ResumeAuto ResumePolicy = "Auto"
	// ResumeNever fails the job on any failure, as if it had no
	// checkpoints.
	ResumeNever ResumePolicy = "Never"
)

// Checkpoint is the persistent volume a TrainingJob writes checkpoints to
// and the restart policy that relies on them.
//
// The contract with the training code (see the chart's README):
//   - The volume is mounted at mountPath. With accessMode ReadWriteOnce only
//     the rank-0 pod mounts it (the Master of pytorch and xgboost, the Chief
//     of tensorflow; paddle needs ReadWriteMany with more than one worker):
//     rank 0 writes checkpoints and shares restored state with the other
//     ranks. With ReadWriteMany every pod mounts it.
//   - Every training container gets MLPLATFORM_RUN (the run index, from
//     1), MLPLATFORM_RESTART_COUNT (failures restarted so far) and
//     MLPLATFORM_RESUME ("true" when an earlier run of this TrainingJob
//     ran, so a checkpoint may exist); pods that mount the volume also get
//     MLPLATFORM_CHECKPOINT_DIR. Training code should load the newest
//     complete checkpoint in MLPLATFORM_CHECKPOINT_DIR when there is one,
//     and write checkpoints atomically (to a temporary name, then rename).
//   - Each run is a new Kubeflow job, <name>-r<run>, on the same volume.
//
// +kubebuilder:validation:XValidation:rule="has(self.claimName) != has(self.size)",message="checkpoint needs exactly one of claimName (an existing claim) and size (a claim the operator creates)"
// +kubebuilder:validation:XValidation:rule="!has(self.claimName) || !has(self.storageClassName)",message="checkpoint.storageClassName applies only to a claim the operator creates (size)"
// +kubebuilder:validation:XValidation:rule="!has(self.claimName) || self.deletionPolicy != 'Delete'",message="checkpoint.deletionPolicy Delete applies only to a claim the operator creates; an existing claim is never deleted"
type Checkpoint struct {
	// ClaimName is an existing PersistentVolumeClaim in the job's
	// namespace. It must offer accessMode. The operator never deletes it.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ClaimName string `json:"claimName,omitempty"`

	// Size of the claim the operator creates, named <name>-checkpoint.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0",message="checkpoint.size must be at least 1Mi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Ei')) <= 0",message="checkpoint.size must be at most 1Ei: storage sizes are counted in bytes in an int64"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the claim the operator creates; unset means the
	// cluster's default class, and empty no class (a claim that binds only
	// to an existing volume without one), as for the claim itself.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="checkpoint.storageClassName must be a StorageClass name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (a DNS subdomain)"
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// AccessMode of the volume: ReadWriteOnce or ReadWriteMany (every pod
	// mounts it). With ReadWriteOnce on the kubeflow backend only the
	// rank-0 pod mounts it; on the native backend every rank runs from one
	// pod template, so every pod mounts it and the ranks must share the
	// node the volume attaches to: use ReadWriteMany for trainings that
	// span nodes.
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteMany
	// +kubebuilder:default=ReadWriteOnce
	// +optional
	AccessMode corev1.PersistentVolumeAccessMode `json:"accessMode,omitempty"`

	// MountPath of the volume in the training container: an absolute path
	// outside the operator's own mounts (see PodTemplatePatch).
	// +kubebuilder:default="/checkpoints"
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && self != '/' && !self.contains('..')",message="checkpoint.mountPath must be an absolute path other than /, without '..'"
	// +kubebuilder:validation:XValidation:rule="!['/dev/shm', '/etc/mlplatform', '/var/run/secrets/mlplatform.dev', '/var/lib/mlplatform-mpi'].exists(p, self == p || self.startsWith(p + '/'))",message="checkpoint.mountPath: /dev/shm, /etc/mlplatform, /var/run/secrets/mlplatform.dev and /var/lib/mlplatform-mpi, and every path under them, are reserved for the operator's mounts; choose another path"
	// +optional
	MountPath string `json:"mountPath,omitempty"`

	// Resume is Auto (an infrastructure failure starts a new run on the
	// same volume) or Never (every failure is final).
	// +kubebuilder:default=Auto
	// +optional
	Resume ResumePolicy `json:"resume,omitempty"`

	// MaxRestarts bounds the new runs started after failures; the job
	// fails once it is exhausted.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`

	// RestartBackoffSeconds is the wait before the first restart; it
	// doubles with every further restart, up to one hour.
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	RestartBackoffSeconds *int32 `json:"restartBackoffSeconds,omitempty"`

	// DeletionPolicy of the claim the operator creates: Retain (default)
	// keeps it, and the trained model in it, after the TrainingJob is
	// deleted or expires by ttlSecondsAfterFinished (a TrainingJob of the
	// same name created later uses it again); Delete removes it with the
	// TrainingJob.
	// +kubebuilder:default=Retain
	// +optional
	DeletionPolicy commonv1alpha1.DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// PodTemplatePatch holds the parts of the generated pods that users choose.
//
// The operator adds volumes and mounts of its own to the pods, and the API
// server refuses a pod with two volumes of one name or two mounts on one
// path. So that a job it accepted never makes a child the API server
// refuses, the names and paths of the operator's volumes are reserved:
// the volume names dshm, featurestore-* and mlplatform-* (shared memory,
// FeatureStores, MPI keys, the progress token, and any the operator adds
// later), and the mount paths /dev/shm, /etc/mlplatform,
// /var/run/secrets/mlplatform.dev and /var/lib/mlplatform-mpi with every
// path under them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name))",message="every volumeMounts[].name must name one of template.volumes"
// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || self.volumes.all(v, v.name != 'dshm' && !v.name.startsWith('featurestore-') && !v.name.startsWith('mlplatform-'))",message="volume names dshm, featurestore-* and mlplatform-* are reserved for the operator's volumes (shared memory, FeatureStores, MPI keys, progress token); rename the volume"
// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, !['/dev/shm', '/etc/mlplatform', '/var/run/secrets/mlplatform.dev', '/var/lib/mlplatform-mpi'].exists(p, m.mountPath == p || m.mountPath.startsWith(p + '/')))",message="template.volumeMounts: /dev/shm, /etc/mlplatform, /var/run/secrets/mlplatform.dev and /var/lib/mlplatform-mpi, and every path under them, are reserved for the operator's mounts; choose another path, and size /dev/shm with sharedMemory"
type PodTemplatePatch struct {
	// Labels added to every pod. Labels of the platform and of Kubeflow win
	// over these.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to every pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Volumes added to every pod.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// VolumeMounts of the training container; each names one of Volumes.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// Tolerations added to the accelerator type's tolerations.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// NodeSelector narrows the nodes further than the accelerator type does.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Affinity of every pod.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// ServiceAccountName the pods run as; empty means the namespace's
	// default ServiceAccount.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// PriorityClassName of every pod.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ImagePullSecrets for the training image.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// VolumeMount mounts one of the template's volumes into the training
// container. It is a bounded subset of a container's volume mount, which
// keeps the CRD's CEL rules within the API server's cost budget.
type VolumeMount struct {
	// Name of the volume, one of template.volumes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// MountPath in the container.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	MountPath string `json:"mountPath"`
	// SubPath within the volume to mount instead of its root.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	SubPath string `json:"subPath,omitempty"`
	// ReadOnly mounts the volume read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// SharedMemory configures /dev/shm.
type SharedMemory struct {
	// Disabled leaves /dev/shm to the container runtime's default (64Mi).
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// SizeLimit bounds the memory-backed volume; it counts against the
	// pod's memory limit. Empty means the platform's default size; to
	// leave /dev/shm to the container runtime, set disabled.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="sharedMemory.sizeLimit must be greater than 0: leave it unset for the platform's default size, or set disabled"
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// MaxActiveDeadlineSeconds is the largest runPolicy.activeDeadlineSeconds:
// the child's controller multiplies it by time.Second in an int64, which
// overflows above this.
const MaxActiveDeadlineSeconds = 9223372036

// RunPolicy bounds a run and says what happens after it.
type RunPolicy struct {
	// ActiveDeadlineSeconds fails the job once it has run this long,
	// counted from status.deadlineStartTime: when the job first ran, or
	// when it ran again after the user resumed it or after Kueue readmitted
	// it following an eviction. As for a Kubernetes Job, whose timer
	// restarts when it is resumed, a resume or a readmission starts the
	// deadline anew; a run that follows a restart after a failure gets
	// what is left, and a run its deadline ended is not restarted. At
	// most 9223372036 (about 292 years): the child's controller counts the
	// deadline in nanoseconds in an int64, and a larger value overflows
	// into a deadline already past.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 9223372036",message="runPolicy.activeDeadlineSeconds must be at most 9223372036 (about 292 years): Kubernetes counts the deadline in nanoseconds in an int64"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="runPolicy.activeDeadlineSeconds is immutable"
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// BackoffLimit has no effect, on either backend; it is kept so that
	// existing manifests stay valid. A failed pod ends its run at once (its
	// restart policy is Never), and checkpoint.maxRestarts bounds the runs
	// that follow infrastructure failures; a user error is never retried.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="runPolicy.backoffLimit is immutable"
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// TTLSecondsAfterFinished deletes the TrainingJob, and with it its
	// pods, this long after it succeeded or failed. Unset keeps it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// CleanPodPolicy says which pods are deleted once the outcome is
	// recorded: All, Running (pods that still run, such as parameter
	// servers; finished pods stay for their logs) or None.
	// +kubebuilder:default=Running
	// +optional
	CleanPodPolicy CleanPodPolicy `json:"cleanPodPolicy,omitempty"`
}

// TrainingJobStatus is what the operator observed.
type TrainingJobStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Backend is the backend the job runs on: spec.backend, or the
	// operator's default when the job was first reconciled. It never
	// changes once set.
	// +optional
	Backend Backend `json:"backend,omitempty"`

	// Conditions: Created, Running, Suspended, Succeeded, Failed,
	// Finished (True once the job succeeded or failed: the one condition
	// to `kubectl wait --for=condition=Finished` on), FeatureStoresReady,
	// CheckpointReady, Queued, Restarting, and Reconciling/Stalled for
	// kstatus (a failed job is Stalled).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase summarises the conditions for printing: Pending, Queued,
	// Running, Restarting, Suspended, Succeeded or Failed.
	// +optional
	Phase TrainingJobPhase `json:"phase,omitempty"`

	// Run is the index of the current run, starting at 1. Each run is one
	// Kubeflow job whose name carries the index. The operator moves to the
	// next run only after recording that decision here, so a restarted
	// operator continues with the same run rather than starting another.
	// +optional
	Run int32 `json:"run,omitempty"`

	// RestartCount is the number of runs started after a failure.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`

	// NextRunTime is the earliest time the next run starts, while the job
	// backs off after a failure.
	// +optional
	NextRunTime *metav1.Time `json:"nextRunTime,omitempty"`

	// Runs is the history of the last ended runs, oldest first.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Runs []RunRecord `json:"runs,omitempty"`

	// CheckpointClaim is the PersistentVolumeClaim that holds the job's
	// checkpoints.
	// +optional
	CheckpointClaim string `json:"checkpointClaim,omitempty"`

	// Job is the child of the current run: a batch/v1 Job on the native
	// backend, a Kubeflow job on the kubeflow backend.
	// +optional
	Job *JobReference `json:"job,omitempty"`

	// StartTime is when the job was first seen running.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// DeadlineStartTime is when runPolicy.activeDeadlineSeconds began to
	// count: when the job first ran; later, when the user resumed a job
	// suspended in place or Kueue readmitted it after an eviction (as the
	// operator saw it), or when the first run after the user resumed a
	// queued job started. Each of these restarts the run's child's own
	// deadline too; a restart after a failure moves neither. Unset before
	// the job ran, and from a queued job's suspension until its next run
	// starts. A job whose status predates this field counts from
	// startTime, or from the first run after its last suspension in runs,
	// until it runs again.
	// +optional
	DeadlineStartTime *metav1.Time `json:"deadlineStartTime,omitempty"`

	// CompletionTime is when the job succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Roles counts the pods of each role when a run ends: Master, Chief,
	// Worker, PS on the kubeflow backend, one role, Pods, on the native
	// backend. It is not updated while a run goes on: counting every pod
	// change would cost a status write each.
	// +listType=map
	// +listMapKey=name
	// +optional
	Roles []RoleStatus `json:"roles,omitempty"`

	// Duration from startTime to completionTime, such as "1h2m3s"; set
	// once the job finished, for printing.
	// +optional
	Duration string `json:"duration,omitempty"`

	// Failure explains a failed job: the reason and, when a container
	// failed, its termination message.
	// +optional
	Failure *Failure `json:"failure,omitempty"`
	// Progress is the training's own progress: step, percent, ETA and a few
	// metrics, when the training reports them.
	// +optional
	Progress *TrainingProgress `json:"progress,omitempty"`
	// Queue is where the job waits while Kueue has not admitted its
	// current run; absent otherwise.
	// +optional
	Queue *commonv1alpha1.QueueStatus `json:"queue,omitempty"`
}

// TrainingJobPhase is a one-word summary of the conditions.
type TrainingJobPhase string

// The phases, in the order a job normally goes through them.
const (
	PhasePending    TrainingJobPhase = "Pending"
	PhaseQueued     TrainingJobPhase = "Queued"
	PhaseRunning    TrainingJobPhase = "Running"
	PhaseRestarting TrainingJobPhase = "Restarting"
	PhaseSuspended  TrainingJobPhase = "Suspended"
	PhaseSucceeded  TrainingJobPhase = "Succeeded"
	PhaseFailed     TrainingJobPhase = "Failed"
)

// JobReference names the child of a run.
type JobReference struct {
	// APIVersion of the job: batch/v1 or kubeflow.org/v1.
	APIVersion string `json:"apiVersion"`
	// Kind of the job: Job, or a Kubeflow kind such as PyTorchJob.
	Kind string `json:"kind"`
	// Name of the job, in the TrainingJob's namespace.
	Name string `json:"name"`
}

// RoleStatus counts the pods of one role.
type RoleStatus struct {
	// Name of the role: Master, Chief, Worker or PS.
	Name string `json:"name"`
	// Active pods (pending or running).
	// +optional
	Active int32 `json:"active,omitempty"`
	// Succeeded pods.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed pods.
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// FailureClass says whether a failure is worth a new run.
type FailureClass string

const (
	// FailureClassInfrastructure is a failure of the platform, not of the
	// training: preemption, eviction, node loss or shutdown, a drain. A
	// new run from the last checkpoint is likely to succeed.
	FailureClassInfrastructure FailureClass = "Infrastructure"
	// FailureClassUser is a failure of the training or its configuration:
	// a non-zero exit, running out of memory, an image or configuration
	// error. Running it again would fail again.
	FailureClassUser FailureClass = "User"
	// FailureClassUnknown is a failure the pods do not explain (for
	// example a deadline); it is not retried.
	FailureClassUnknown FailureClass = "Unknown"
)

// RunRecord is one ended run.
type RunRecord struct {
	// Run is the run index; its Kubeflow job is <name>-r<run>.
	Run int32 `json:"run"`
	// Reason the run ended, one CamelCase word: Succeeded, Suspended, or
	// the cause of a failure such as Preempted, Evicted, NodeLost,
	// NodeShutdown, Drained, OOMKilled, Error, ImagePullFailed,
	// ConfigError or Unknown.
	Reason string `json:"reason"`
	// Class of a failure: Infrastructure, User or Unknown.
	// +optional
	Class FailureClass `json:"class,omitempty"`
	// Message explains the reason.
	// +optional
	Message string `json:"message,omitempty"`
	// StartTime is when the run started running, if it did.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// EndTime is when the run ended.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
}

// Failure explains why a job failed.
type Failure struct {
	// Reason is Kubeflow's reason, one CamelCase word.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Class of the failure, from the pods: Infrastructure, User or
	// Unknown.
	// +optional
	Class FailureClass `json:"class,omitempty"`
	// Cause of the failure, from the pods, one CamelCase word (see
	// RunRecord.Reason).
	// +optional
	Cause string `json:"cause,omitempty"`
	// MemoryLimit of the container when it was OOMKilled.
	// +optional
	MemoryLimit string `json:"memoryLimit,omitempty"`
	// Message is Kubeflow's message.
	// +optional
	Message string `json:"message,omitempty"`
	// Pod whose container failed, if one did.
	// +optional
	Pod string `json:"pod,omitempty"`
	// Container that failed.
	// +optional
	Container string `json:"container,omitempty"`
	// ExitCode of the failed container.
	// +optional
	ExitCode int32 `json:"exitCode,omitempty"`
	// TerminationMessage of the failed container: what it wrote to
	// /dev/termination-log, else the tail of its log.
	// +optional
	TerminationMessage string `json:"terminationMessage,omitempty"`
}

// TrainingJob runs a distributed training: on Kubernetes' own Indexed Jobs
// (backend native, the default) or through the Kubeflow training-operator
// (backend kubeflow).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mltj,categories=mlplatform
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.spec.framework`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.spec.workers`
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.status.backend`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restartCount`
// +kubebuilder:printcolumn:name="Position",type=integer,JSONPath=`.status.queue.position`,description="Place in the Kueue LocalQueue while queued"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.status.duration`
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.percent`,description="Percent of the reported total steps done"
// +kubebuilder:printcolumn:name="Run",type=integer,JSONPath=`.status.run`,priority=1,description="Index of the current run; it grows with each restart of the whole job"
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueName`,priority=1,description="Kueue LocalQueue the job is submitted to"
// +kubebuilder:printcolumn:name="Cause",type=string,JSONPath=`.status.failure.cause`,priority=1,description="Cause of the failure, from the pods (e.g. OOMKilled)"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.failure.reason`,priority=1,description="Kubeflow's reason of the failure"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40",message="metadata.name must be at most 40 characters: the Kubeflow job, its pods and Services are named after it"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a letter and contain only lowercase letters, digits and '-' (a DNS-1035 label), as Kubeflow's Service names require"
// +kubebuilder:validation:XValidation:rule="(has(self.spec.queueName) == has(oldSelf.spec.queueName) && (!has(self.spec.queueName) || self.spec.queueName == oldSelf.spec.queueName)) || !has(oldSelf.status) || !has(oldSelf.status.conditions) || oldSelf.status.conditions.exists(c, c.type == 'Queued' && c.status == 'True') || !oldSelf.status.conditions.exists(c, c.type == 'Created' && c.status == 'True')",message="spec.queueName can change only while the job waits in its queue (Queued=True) or before its first run was created: Kueue does not move admitted workloads"
type TrainingJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   TrainingJobSpec   `json:"spec"`
	Status TrainingJobStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (t *TrainingJob) GetConditions() []metav1.Condition { return t.Status.Conditions }

// SetConditions replaces the status conditions.
func (t *TrainingJob) SetConditions(c []metav1.Condition) { t.Status.Conditions = c }

// TrainingJobList is a list of TrainingJobs.
//
// +kubebuilder:object:root=true
type TrainingJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingJob `json:"items"`
}
