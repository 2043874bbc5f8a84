package kubeflowcompat

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestKubeflowPodSecurityRefusalIsReported runs the real training-operator
// in a namespace that enforces the restricted Pod Security Standard: the
// API server refuses the pod with a hostPath volume, and the
// training-operator says so only in FailedCreatePod events on its job.
func TestKubeflowPodSecurityRefusalIsReported(t *testing.T) {
	c, ns, kf := startStack(t)
	nsObj := &corev1.Namespace{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := c.Update(t.Context(), nsObj); err != nil {
		t.Fatal(err)
	}
	tj := &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostpath"},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch,
			Image:     "registry.example.com/mnist:1",
			Workers:   1,
			Template: &trainingv1alpha1.PodTemplatePatch{
				Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/data"}}}},
			},
		},
	}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	const words = `violates PodSecurity "restricted:latest": restricted volume types (volume "host" uses restricted volume type "hostPath")`
	got := &trainingv1alpha1.TrainingJob{}
	poll(t, "Running=False PodsRefused (the training-operator's log: "+kf.LogPath()+")", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, err
		}
		r := conditions.Get(got, trainingv1alpha1.ConditionRunning)
		return r != nil && r.Reason == commonv1alpha1.ReasonPodsRefused, nil
	})
	if r := conditions.Get(got, trainingv1alpha1.ConditionRunning); !strings.Contains(r.Message, words) || !strings.Contains(r.Message, "PyTorchJob hostpath-r1 cannot create its pods (FailedCreatePod)") {
		t.Errorf("Running message %q", r.Message)
	}
	if e := testenv.WaitForEvent(t, c, got, commonv1alpha1.ReasonPodsRefused); e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, words) {
		t.Errorf("event %s %q", e.Type, e.Message)
	}
}
