package trainingjob

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// CacheTransforms slim the operator's cached Jobs and pods, for
// shared/manager: a cluster with 20 000 TrainingJobs holds as many Jobs
// and their pods, and the operator reads little of them. It only creates a
// Job (never updates it: suspend and labels are patches of their own), and
// reads its metadata, spec.suspend, spec.parallelism and status, not its
// pod template. Of a pod it reads metadata, status, and each container's
// name, image and resources (the memory limit an OOM message names);
// the progress endpoint's authorization reads the pod's owner and UID.
// A TrainingJob keeps everything but the copy of itself that kubectl apply
// leaves in an annotation.
func CacheTransforms() map[client.Object]toolscache.TransformFunc {
	return map[client.Object]toolscache.TransformFunc{
		&batchv1.Job{}: slimJob, &corev1.Pod{}: slimPod,
		&trainingv1alpha1.TrainingJob{}: manager.StripLastApplied,
	}
}

func slimJob(obj any) (any, error) {
	if job, ok := obj.(*batchv1.Job); ok {
		job.Spec.Template = corev1.PodTemplateSpec{}
	}
	return obj, nil
}

func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.Spec = corev1.PodSpec{
		InitContainers: slimContainers(pod.Spec.InitContainers),
		Containers:     slimContainers(pod.Spec.Containers),
		RestartPolicy:  pod.Spec.RestartPolicy,
		NodeName:       pod.Spec.NodeName,
		Hostname:       pod.Spec.Hostname,
		Subdomain:      pod.Spec.Subdomain,
	}
	return pod, nil
}

func slimContainers(in []corev1.Container) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i, c := range in {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources}
	}
	return out
}
