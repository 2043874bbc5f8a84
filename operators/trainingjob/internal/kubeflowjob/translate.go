package kubeflowjob

import (
	"fmt"
	"maps"
	"strconv"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
)

// SharedMemoryVolume is the name of the memory-backed /dev/shm volume; the
// CRD reserves it.
const SharedMemoryVolume = "dshm"

// Settings are the platform team's choices that shape every generated job.
type Settings struct {
	// OperatorName is the value of app.kubernetes.io/managed-by on jobs and
	// pods, which puts them into the operator's label-restricted caches.
	OperatorName string
	// Catalog maps accelerator types to device resources and node labels.
	Catalog accelerator.Catalog
	// SharedMemorySize is the /dev/shm size of jobs that set none; zero
	// means unbounded (up to the pod's memory limit).
	SharedMemorySize resource.Quantity
	// RunAsUser is the non-root user generated pods run as.
	RunAsUser int64
}

// InvalidSpecError is a spec that passed the CRD's validation but cannot be
// translated in this cluster, such as an accelerator type the platform does
// not offer. Only a change by a person fixes it.
type InvalidSpecError struct{ Err error }

func (e *InvalidSpecError) Error() string { return e.Err.Error() }

func (e *InvalidSpecError) Unwrap() error { return e.Err }

// JobName is the Kubeflow job of a run. The run index in the name makes a
// restart a new object, never an in-place change of a finished one.
func JobName(trainingJob string, run int32) string {
	return fmt.Sprintf("%s-r%d", trainingJob, run)
}

// Labels are the labels of the job of a run and of its pods.
func Labels(operatorName, trainingJob string, run int32) map[string]string {
	l := manager.ManagedByLabels(operatorName)
	l[trainingv1alpha1.LabelJobName] = trainingJob
	l[trainingv1alpha1.LabelRun] = strconv.Itoa(int(run))
	return l
}

// CheckpointClaimName is the claim holding tj's checkpoints: the existing
// claim it names, else the one the operator creates for it. It is empty
// when tj has no checkpoint.
func CheckpointClaimName(tj *trainingv1alpha1.TrainingJob) string {
	cp := tj.Spec.Checkpoint
	switch {
	case cp == nil:
		return ""
	case cp.ClaimName != "":
		return cp.ClaimName
	default:
		return tj.Name + "-checkpoint"
	}
}

// Build returns the Kubeflow job for a run of tj, with stores mounted. It
// is deterministic: the same inputs always give the same object, so an
// operator upgrade that keeps the translation never restarts a job (the
// golden files pin it). The job keeps Kubeflow's clean-pod policy None and
// no TTL: the operator applies the user's policies itself once it has
// recorded the outcome, so failed pods remain readable until then.
//
// A job with a checkpoint gets the checkpoint volume and the environment
// contract (see trainingv1alpha1.Checkpoint), with the restart count that
// tj's status recorded before this run was decided. A job with a queue
// name is created suspended with Kueue's queue label, for Kueue to admit.
// Jobs without either are generated exactly as before these existed.
func Build(fw Framework, tj *trainingv1alpha1.TrainingJob, run int32, stores []featureref.Store, s Settings) (client.Object, error) {
	var acc *commonv1alpha1.Accelerators
	if tj.Spec.Resources != nil {
		acc = tj.Spec.Resources.Accelerators
	}
	class, err := s.Catalog.Resolve(acc)
	if err != nil {
		return nil, &InvalidSpecError{Err: err}
	}
	labels := Labels(s.OperatorName, tj.Name, run)
	template := podTemplate(fw, tj, labels, class, stores, s)

	replicas := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}
	for i, role := range fw.Roles(&tj.Spec) {
		rs := &kubeflowv1.ReplicaSpec{
			Replicas:      ptr.To(role.Replicas),
			Template:      *template.DeepCopy(),
			RestartPolicy: kubeflowv1.RestartPolicyOnFailure,
		}
		if cp := tj.Spec.Checkpoint; cp != nil {
			// The first role holds rank 0 (Master, Chief, or paddle's
			// only Worker); a ReadWriteOnce volume attaches to one node,
			// so only that role mounts it.
			mount := i == 0 || cp.AccessMode == corev1.ReadWriteMany
			addCheckpoint(&rs.Template.Spec, tj, run, mount)
		}
		replicas[role.Type] = rs
	}
	runPolicy := kubeflowv1.RunPolicy{
		CleanPodPolicy:        ptr.To(kubeflowv1.CleanPodPolicyNone),
		ActiveDeadlineSeconds: tj.Spec.RunPolicy.ActiveDeadlineSeconds,
		BackoffLimit:          tj.Spec.RunPolicy.BackoffLimit,
		Suspend:               ptr.To(tj.Spec.Suspend),
	}
	meta := metav1.ObjectMeta{
		Namespace: tj.Namespace,
		Name:      JobName(tj.Name, run),
		Labels:    labels,
	}
	if q := tj.Spec.QueueName; q != "" {
		// Kueue admits a job by unsuspending it; the operator never does
		// for a queued job.
		meta.Labels = maps.Clone(labels)
		meta.Labels[trainingv1alpha1.LabelKueueQueueName] = q
		runPolicy.Suspend = ptr.To(true)
	}
	return fw.New(meta, &tj.Spec, runPolicy, replicas), nil
}

// addCheckpoint adds the environment contract to the training container
// and, when mount is true, the checkpoint volume.
func addCheckpoint(spec *corev1.PodSpec, tj *trainingv1alpha1.TrainingJob, run int32, mount bool) {
	cp := tj.Spec.Checkpoint
	c := &spec.Containers[0]
	if mount {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: trainingv1alpha1.CheckpointVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: CheckpointClaimName(tj)},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: trainingv1alpha1.CheckpointVolume, MountPath: cp.MountPath})
		c.Env = append(c.Env, corev1.EnvVar{Name: trainingv1alpha1.EnvCheckpointDir, Value: cp.MountPath})
	}
	// Any earlier run may have left a checkpoint, whether it ended by a
	// failure or by a suspension of a queued job.
	resume := run > 1
	c.Env = append(c.Env,
		corev1.EnvVar{Name: trainingv1alpha1.EnvRun, Value: strconv.Itoa(int(run))},
		corev1.EnvVar{Name: trainingv1alpha1.EnvRestartCount, Value: strconv.Itoa(int(tj.Status.RestartCount))},
		corev1.EnvVar{Name: trainingv1alpha1.EnvResume, Value: strconv.FormatBool(resume)},
	)
}

func podTemplate(fw Framework, tj *trainingv1alpha1.TrainingJob, labels map[string]string, class *accelerator.Class, stores []featureref.Store, s Settings) corev1.PodTemplateSpec {
	patch := tj.Spec.Template
	if patch == nil {
		patch = &trainingv1alpha1.PodTemplatePatch{}
	}
	name, p := fw.Container()
	// Container security follows the restricted Pod Security Standard, but
	// the root filesystem stays writable: training libraries write caches
	// under $HOME and /tmp, and a read-only root breaks them in ways users
	// cannot fix from the TrainingJob.
	security := podsecurity.ContainerSecurityContext()
	security.ReadOnlyRootFilesystem = ptr.To(false)
	container := corev1.Container{
		Name:       name,
		Image:      tj.Spec.Image,
		Command:    tj.Spec.Command,
		Args:       tj.Spec.Args,
		WorkingDir: tj.Spec.WorkingDir,
		Env:        tj.Spec.Env,
		Ports:      []corev1.ContainerPort{p},
		// The log tail stands in for a termination message the program did
		// not write, so a failure is explained in the TrainingJob's status.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		SecurityContext:          security,
	}
	if tj.Spec.Resources != nil {
		container.Resources = *tj.Spec.Resources.ResourceRequirements.DeepCopy()
	}
	for _, m := range patch.VolumeMounts {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath, ReadOnly: m.ReadOnly})
	}

	spec := corev1.PodSpec{
		Volumes:            append([]corev1.Volume(nil), patch.Volumes...),
		Tolerations:        append([]corev1.Toleration(nil), patch.Tolerations...),
		NodeSelector:       maps.Clone(patch.NodeSelector),
		Affinity:           patch.Affinity.DeepCopy(),
		ServiceAccountName: patch.ServiceAccountName,
		PriorityClassName:  patch.PriorityClassName,
		ImagePullSecrets:   append([]corev1.LocalObjectReference(nil), patch.ImagePullSecrets...),
		SecurityContext:    podsecurity.PodSecurityContext(s.RunAsUser),
	}
	if shm := tj.Spec.SharedMemory; shm == nil || !shm.Disabled {
		size := s.SharedMemorySize
		if shm != nil && shm.SizeLimit != nil {
			size = *shm.SizeLimit
		}
		emptyDir := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if !size.IsZero() {
			emptyDir.SizeLimit = &size
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: SharedMemoryVolume, VolumeSource: corev1.VolumeSource{EmptyDir: emptyDir}})
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: SharedMemoryVolume, MountPath: "/dev/shm"})
	}
	var count int32
	if tj.Spec.Resources != nil && tj.Spec.Resources.Accelerators != nil {
		count = tj.Spec.Resources.Accelerators.Count
	}
	spec.Containers = []corev1.Container{container}
	accelerator.Apply(class, count, &spec, &spec.Containers[0])
	featureref.Mount(&spec, []string{name}, stores)

	podLabels := maps.Clone(patch.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, labels)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(patch.Annotations)},
		Spec:       spec,
	}
}

// nprocPerNode is the number of processes per pytorch pod: the spec's, else
// one per accelerator, else one. It is always set so that the Kubeflow
// defaulter ("auto") never changes what a job runs with.
func nprocPerNode(spec *trainingv1alpha1.TrainingJobSpec) *string {
	n := int32(1)
	switch {
	case spec.NprocPerNode != nil:
		n = *spec.NprocPerNode
	case spec.Resources != nil && spec.Resources.Accelerators != nil && spec.Resources.Accelerators.Count > 0:
		n = spec.Resources.Accelerators.Count
	}
	return ptr.To(strconv.Itoa(int(n)))
}
