package trainingjob

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/failure"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
)

// TestCacheTransformsKeepWhatTheOperatorReads slims a Job and an OOM-killed
// pod as the cache does and checks that the Job's observed state and the
// pod's failure classification (which names the memory limit) are those of
// the whole objects, while the templates and environment are gone.
func TestCacheTransformsKeepWhatTheOperatorReads(t *testing.T) {
	transforms := CacheTransforms()
	slim := func(obj client.Object) client.Object {
		for proto, fn := range transforms {
			if reflect.TypeOf(proto) == reflect.TypeOf(obj) {
				out, err := fn(obj.DeepCopyObject())
				if err != nil {
					t.Fatal(err)
				}
				return out.(client.Object)
			}
		}
		t.Fatalf("no transform for %T", obj)
		return nil
	}
	container := corev1.Container{
		Name: "pytorch", Image: "train:1", Command: []string{"python"}, Env: []corev1.EnvVar{{Name: "MASTER_ADDR", Value: "job-0"}},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "job-r1", Labels: map[string]string{trainingv1alpha1.LabelJobName: "job"}},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true), Parallelism: ptr.To[int32](4),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container}}},
		},
		Status: batchv1.JobStatus{Active: 2, Ready: ptr.To[int32](1)},
	}
	be := nativejob.NewBackend(backend.Settings{})
	slimJob := slim(job).(*batchv1.Job)
	if got, want := be.Observe(slimJob), be.Observe(job); !reflect.DeepEqual(got, want) {
		t.Errorf("observed from the slim Job %+v, from the whole one %+v", got, want)
	}
	if len(slimJob.Spec.Template.Spec.Containers) != 0 || slimJob.Labels[trainingv1alpha1.LabelJobName] != "job" {
		t.Errorf("slim Job keeps its template or loses its labels: %+v", slimJob)
	}

	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-r1-0", UID: "u1", Labels: map[string]string{trainingv1alpha1.LabelJobName: "job"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{container}, Volumes: []corev1.Volume{{Name: "shm"}}, RestartPolicy: corev1.RestartPolicyNever},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "pytorch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
		}}},
	}
	slimPod := slim(&pod).(*corev1.Pod)
	if got, want := failure.Classify([]corev1.Pod{*slimPod}), failure.Classify([]corev1.Pod{pod}); got != want {
		t.Errorf("classified from the slim pod %+v, from the whole one %+v", got, want)
	}
	if c := slimPod.Spec.Containers[0]; len(c.Env) != 0 || len(c.Command) != 0 || len(slimPod.Spec.Volumes) != 0 || c.Name != "pytorch" {
		t.Errorf("slim pod keeps what nothing reads, or loses its container's name: %+v", slimPod.Spec)
	}
}
