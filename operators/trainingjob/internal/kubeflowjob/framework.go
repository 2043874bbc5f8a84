package kubeflowjob

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
)

// Role is one replica type of a Kubeflow job and its pod count.
type Role struct {
	Type     kubeflowv1.ReplicaType
	Replicas int32
}

// Framework is what differs between the Kubeflow job kinds. Each kind is a
// small value registered explicitly in Frameworks; the translation and the
// reconciler are written once against this interface.
type Framework interface {
	// Kind is the Kubeflow kind, such as PyTorchJob.
	Kind() string
	// Container is the container name and port the Kubeflow
	// training-operator looks for in the pod template.
	Container() (string, corev1.ContainerPort)
	// Roles derives the replica types and counts from the spec.
	Roles(spec *trainingv1alpha1.TrainingJobSpec) []Role
	// New wraps replica specs and a run policy into a job object.
	New(meta metav1.ObjectMeta, spec *trainingv1alpha1.TrainingJobSpec, runPolicy kubeflowv1.RunPolicy, replicas map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) client.Object
	// Empty returns an empty job object, for reads and watches.
	Empty() client.Object
	// Parts returns pointers into a job object of this kind: its run
	// policy and its status.
	Parts(obj client.Object) (*kubeflowv1.RunPolicy, *kubeflowv1.JobStatus)
}

// ExecEnv is implemented by frameworks whose training-operator sets an
// environment variable that grows with the job (tensorflow's TF_CONFIG
// lists every replica): the longest value any pod of a run gets, which
// Build refuses past what Linux passes a program (backend.FitExec).
type ExecEnv interface {
	ExecEnv(tj *trainingv1alpha1.TrainingJob, run int32) []corev1.EnvVar
}

var (
	_ ExecEnv   = tensorflow{}
	_ Framework = pytorch{}
	_ Framework = tensorflow{}
	_ Framework = xgboost{}
	_ Framework = paddle{}
)

// Frameworks lists every supported framework. The map is built on each call
// so that no caller can change another's registry.
func Frameworks() map[trainingv1alpha1.Framework]Framework {
	return map[trainingv1alpha1.Framework]Framework{
		trainingv1alpha1.FrameworkPyTorch:    pytorch{},
		trainingv1alpha1.FrameworkTensorFlow: tensorflow{},
		trainingv1alpha1.FrameworkXGBoost:    xgboost{},
		trainingv1alpha1.FrameworkPaddle:     paddle{},
		trainingv1alpha1.FrameworkMPI:        mpiJob{},
	}
}

// leaderAndWorkers is the topology of pytorch and xgboost: one coordinating
// pod and the rest workers. A Worker replica type with zero replicas is left
// out, because Kubeflow would still create its headless Services.
func leaderAndWorkers(leader kubeflowv1.ReplicaType, worker kubeflowv1.ReplicaType, workers int32) []Role {
	roles := []Role{{Type: leader, Replicas: 1}}
	if workers > 1 {
		roles = append(roles, Role{Type: worker, Replicas: workers - 1})
	}
	return roles
}

func port(name string, number int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: number, Protocol: corev1.ProtocolTCP}
}

type pytorch struct{}

func (pytorch) Kind() string { return kubeflowv1.PyTorchJobKind }

func (pytorch) Container() (string, corev1.ContainerPort) {
	return kubeflowv1.PyTorchJobDefaultContainerName, port(kubeflowv1.PyTorchJobDefaultPortName, kubeflowv1.PyTorchJobDefaultPort)
}

func (pytorch) Roles(spec *trainingv1alpha1.TrainingJobSpec) []Role {
	return leaderAndWorkers(kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker, spec.Workers)
}

func (pytorch) New(meta metav1.ObjectMeta, spec *trainingv1alpha1.TrainingJobSpec, rp kubeflowv1.RunPolicy, replicas map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) client.Object {
	return &kubeflowv1.PyTorchJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv1.GroupVersion.String(), Kind: kubeflowv1.PyTorchJobKind},
		ObjectMeta: meta,
		Spec: kubeflowv1.PyTorchJobSpec{
			RunPolicy:           rp,
			PyTorchReplicaSpecs: replicas,
			NprocPerNode:        nprocPerNode(spec),
		},
	}
}

func (pytorch) Empty() client.Object { return &kubeflowv1.PyTorchJob{} }

func (pytorch) Parts(obj client.Object) (*kubeflowv1.RunPolicy, *kubeflowv1.JobStatus) {
	j := obj.(*kubeflowv1.PyTorchJob)
	return &j.Spec.RunPolicy, &j.Status
}

type tensorflow struct{}

func (tensorflow) Kind() string { return kubeflowv1.TFJobKind }

func (tensorflow) Container() (string, corev1.ContainerPort) {
	return kubeflowv1.TFJobDefaultContainerName, port(kubeflowv1.TFJobDefaultPortName, kubeflowv1.TFJobDefaultPort)
}

// Roles gives tensorflow an explicit Chief, which both
// MultiWorkerMirroredStrategy and ParameterServerStrategy accept, so the job
// succeeds when the chief does.
func (tensorflow) Roles(spec *trainingv1alpha1.TrainingJobSpec) []Role {
	roles := leaderAndWorkers(kubeflowv1.TFJobReplicaTypeChief, kubeflowv1.TFJobReplicaTypeWorker, spec.Workers)
	if spec.ParameterServers != nil && *spec.ParameterServers > 0 {
		roles = append(roles, Role{Type: kubeflowv1.TFJobReplicaTypePS, Replicas: *spec.ParameterServers})
	}
	return roles
}

func (tensorflow) New(meta metav1.ObjectMeta, _ *trainingv1alpha1.TrainingJobSpec, rp kubeflowv1.RunPolicy, replicas map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) client.Object {
	return &kubeflowv1.TFJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv1.GroupVersion.String(), Kind: kubeflowv1.TFJobKind},
		ObjectMeta: meta,
		Spec:       kubeflowv1.TFJobSpec{RunPolicy: rp, TFReplicaSpecs: replicas},
	}
}

func (tensorflow) Empty() client.Object { return &kubeflowv1.TFJob{} }

// ExecEnv is the longest TF_CONFIG of the run's pods.
func (tf tensorflow) ExecEnv(tj *trainingv1alpha1.TrainingJob, run int32) []corev1.EnvVar {
	return []corev1.EnvVar{{Name: "TF_CONFIG", Value: tf.tfConfig(tj, run)}}
}

// tfConfigJSON and tfTask are training-operator's TFConfig and TaskSpec.
type tfConfigJSON struct {
	Cluster     map[string][]string `json:"cluster"`
	Task        tfTask              `json:"task"`
	Environment string              `json:"environment"`
}

type tfTask struct {
	Type  string `json:"type"`
	Index int32  `json:"index"`
}

// size orders tasks by the length of their JSON.
func (t tfTask) size() int { return len(t.Type) + len(strconv.Itoa(int(t.Index))) }

// tfConfig is the longest TF_CONFIG that training-operator v1.8 and v1.9
// (pkg/controller.v1/tensorflow: genClusterSpec, genTFConfigJSONStr) give
// a pod of the run: every replica of every type as
// <job>-<type>-<index>.<namespace>.svc:<port>, and the pod's own type and
// index, of which the last of a type is the longest. A cluster domain
// that the training-operator appends (CUSTOM_CLUSTER_DOMAIN) makes it
// longer still; it is not known here.
func (tf tensorflow) tfConfig(tj *trainingv1alpha1.TrainingJob, run int32) string {
	_, p := tf.Container()
	job := backend.JobName(tj.Name, run)
	c := tfConfigJSON{Cluster: map[string][]string{}, Environment: "cloud"}
	for _, role := range tf.Roles(&tj.Spec) {
		rt := strings.ToLower(string(role.Type))
		for i := range role.Replicas {
			c.Cluster[rt] = append(c.Cluster[rt], fmt.Sprintf("%s-%s-%d.%s.svc:%d", job, rt, i, tj.Namespace, p.ContainerPort))
		}
		if last := (tfTask{Type: rt, Index: role.Replicas - 1}); last.size() > c.Task.size() {
			c.Task = last
		}
	}
	out, _ := json.Marshal(c) //nolint:errchkjson // strings and integers always marshal
	return string(out)
}

func (tensorflow) Parts(obj client.Object) (*kubeflowv1.RunPolicy, *kubeflowv1.JobStatus) {
	j := obj.(*kubeflowv1.TFJob)
	return &j.Spec.RunPolicy, &j.Status
}

type xgboost struct{}

func (xgboost) Kind() string { return kubeflowv1.XGBoostJobKind }

func (xgboost) Container() (string, corev1.ContainerPort) {
	return kubeflowv1.XGBoostJobDefaultContainerName, port(kubeflowv1.XGBoostJobDefaultPortName, kubeflowv1.XGBoostJobDefaultPort)
}

func (xgboost) Roles(spec *trainingv1alpha1.TrainingJobSpec) []Role {
	return leaderAndWorkers(kubeflowv1.XGBoostJobReplicaTypeMaster, kubeflowv1.XGBoostJobReplicaTypeWorker, spec.Workers)
}

func (xgboost) New(meta metav1.ObjectMeta, _ *trainingv1alpha1.TrainingJobSpec, rp kubeflowv1.RunPolicy, replicas map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) client.Object {
	return &kubeflowv1.XGBoostJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv1.GroupVersion.String(), Kind: kubeflowv1.XGBoostJobKind},
		ObjectMeta: meta,
		Spec:       kubeflowv1.XGBoostJobSpec{RunPolicy: rp, XGBReplicaSpecs: replicas},
	}
}

func (xgboost) Empty() client.Object { return &kubeflowv1.XGBoostJob{} }

func (xgboost) Parts(obj client.Object) (*kubeflowv1.RunPolicy, *kubeflowv1.JobStatus) {
	j := obj.(*kubeflowv1.XGBoostJob)
	return &j.Spec.RunPolicy, &j.Status
}

type paddle struct{}

func (paddle) Kind() string { return kubeflowv1.PaddleJobKind }

func (paddle) Container() (string, corev1.ContainerPort) {
	return kubeflowv1.PaddleJobDefaultContainerName, port(kubeflowv1.PaddleJobDefaultPortName, kubeflowv1.PaddleJobDefaultPort)
}

// Roles runs paddle in collective mode, Workers only; its Master replica type
// belongs to the parameter-server mode.
func (paddle) Roles(spec *trainingv1alpha1.TrainingJobSpec) []Role {
	return []Role{{Type: kubeflowv1.PaddleJobReplicaTypeWorker, Replicas: spec.Workers}}
}

func (paddle) New(meta metav1.ObjectMeta, _ *trainingv1alpha1.TrainingJobSpec, rp kubeflowv1.RunPolicy, replicas map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) client.Object {
	return &kubeflowv1.PaddleJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv1.GroupVersion.String(), Kind: kubeflowv1.PaddleJobKind},
		ObjectMeta: meta,
		Spec:       kubeflowv1.PaddleJobSpec{RunPolicy: rp, PaddleReplicaSpecs: replicas},
	}
}

func (paddle) Empty() client.Object { return &kubeflowv1.PaddleJob{} }

func (paddle) Parts(obj client.Object) (*kubeflowv1.RunPolicy, *kubeflowv1.JobStatus) {
	j := obj.(*kubeflowv1.PaddleJob)
	return &j.Spec.RunPolicy, &j.Status
}
