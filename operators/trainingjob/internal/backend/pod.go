package backend

import (
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
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
	// Progress, when set, lets the pods report training progress (a
	// projected token and the endpoint's environment).
	Progress *progress.Endpoint
}

// InvalidSpecError is a spec that passed the CRD's validation but cannot be
// translated in this cluster, such as an accelerator type the platform does
// not offer. Only a change by a person fixes it.
type InvalidSpecError struct{ Err error }

func (e *InvalidSpecError) Error() string { return e.Err.Error() }

func (e *InvalidSpecError) Unwrap() error { return e.Err }

// JobName is the child of a run (and, on the native backend, its
// headless Service). The run index in the name makes a
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

// AddCheckpoint adds the environment contract to the training container
// and, when mount is true, the checkpoint volume.
func AddCheckpoint(spec *corev1.PodSpec, tj *trainingv1alpha1.TrainingJob, run int32, mount bool) {
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

// PodTemplate is the pod of every rank of a run, with the training
// container named name and exposing port p: the user's image, command,
// resources with accelerators, template patch, shared memory and
// FeatureStore mounts, under the restricted Pod Security Standard. Each
// backend adds its own framework environment and checkpoint volume.
func PodTemplate(tj *trainingv1alpha1.TrainingJob, labels map[string]string, name string, p corev1.ContainerPort, stores []featureref.Store, s Settings) (corev1.PodTemplateSpec, error) {
	var acc *commonv1alpha1.Accelerators
	if tj.Spec.Resources != nil {
		acc = tj.Spec.Resources.Accelerators
	}
	class, err := s.Catalog.Resolve(acc)
	if err != nil {
		return corev1.PodTemplateSpec{}, &InvalidSpecError{Err: err}
	}
	patch := tj.Spec.Template
	if patch == nil {
		patch = &trainingv1alpha1.PodTemplatePatch{}
	}
	container := trainingContainer(tj, name, p, patch)
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
	mountSharedMemory(tj.Spec.SharedMemory, s.SharedMemorySize, &spec, &container)
	var count int32
	if tj.Spec.Resources != nil && tj.Spec.Resources.Accelerators != nil {
		count = tj.Spec.Resources.Accelerators.Count
	}
	spec.Containers = []corev1.Container{container}
	accelerator.Apply(class, count, &spec, &spec.Containers[0])
	featureref.Mount(&spec, []string{name}, stores)
	s.Progress.Inject(&spec, tj)

	podLabels := maps.Clone(patch.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, labels)
	featureref.Bind(podLabels, stores)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(patch.Annotations)},
		Spec:       spec,
	}, nil
}

// trainingContainer is the training container: the user's image, command,
// environment and resources, and the template patch's volume mounts.
func trainingContainer(tj *trainingv1alpha1.TrainingJob, name string, p corev1.ContainerPort, patch *trainingv1alpha1.PodTemplatePatch) corev1.Container {
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
	return container
}

// mountSharedMemory gives the pod a memory-backed /dev/shm of the job's
// size (the operator's default when it sets none; zero means unbounded),
// unless the job disabled it.
func mountSharedMemory(shm *trainingv1alpha1.SharedMemory, def resource.Quantity, spec *corev1.PodSpec, container *corev1.Container) {
	if shm != nil && shm.Disabled {
		return
	}
	size := def
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

// NprocPerNode is the number of training processes per pytorch pod: the
// spec's, else one per accelerator, else one.
func NprocPerNode(spec *trainingv1alpha1.TrainingJobSpec) int32 {
	switch {
	case spec.NprocPerNode != nil:
		return *spec.NprocPerNode
	case spec.Resources != nil && spec.Resources.Accelerators != nil && spec.Resources.Accelerators.Count > 0:
		return spec.Resources.Accelerators.Count
	default:
		return 1
	}
}
