package steps

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
)

// PodTimeout bounds a client pod's run, import of its interpreter included.
const PodTimeout = 5 * time.Minute

// ClientPod is a one-shot pod that runs script with sh -c in image, under
// the restricted profile with a read-only root filesystem and /tmp on an
// emptyDir, as the operators' pods run. Secrets reach it through env
// (SecretKeyRef) or volumes, never through the script, so that no
// credential is in a pod spec or the test output.
func ClientPod(name, image, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "e2e-client", "e2e-client": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](1000),
				RunAsGroup:     ptr.To[int64](100),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sh", "-c", script},
				Env:             []corev1.EnvVar{{Name: "HOME", Value: "/tmp"}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// SecretEnv adds an environment variable from a Secret's key to the pod.
func SecretEnv(pod *corev1.Pod, name, secret, key string) {
	c := &pod.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}})
}

// SetEnv adds a plain environment variable to the pod.
func SetEnv(pod *corev1.Pod, name, value string) {
	c := &pod.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

// Run creates pod in ns, waits until it ends, and returns whether it
// succeeded and its logs. The pod is left for the namespace's deletion, so
// that a failure's artifacts hold it.
func (e *Env) Run(t *testing.T, ns string, pod *corev1.Pod) (bool, string) {
	t.Helper()
	if _, err := e.CS.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	var phase corev1.PodPhase
	Until(t, "pod "+pod.Name+" to finish", PodTimeout, func(ctx context.Context) (bool, error) {
		p, err := e.CS.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	return phase == corev1.PodSucceeded, cluster.PodLogs(e.CS, ns, pod.Name)
}

// MustRun is Run that fails the test unless the pod succeeded.
func (e *Env) MustRun(t *testing.T, ns string, pod *corev1.Pod) string {
	t.Helper()
	ok, logs := e.Run(t, ns, pod)
	if !ok {
		t.Fatalf("pod %s failed:\n%s", pod.Name, logs)
	}
	return logs
}

// Started creates pod in ns and waits until it runs (for clients that keep
// working while the test goes on, like a busy kernel's client).
func (e *Env) Started(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	if _, err := e.CS.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	Until(t, "pod "+pod.Name+" to run", PodTimeout, func(ctx context.Context) (bool, error) {
		p, err := e.CS.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod %s ended %s:\n%s", pod.Name, p.Status.Phase, cluster.PodLogs(e.CS, ns, pod.Name))
		}
		return p.Status.Phase == corev1.PodRunning, nil
	})
}

// Events returns the messages of the events with reason about the object
// named name in ns.
func (e *Env) Events(ctx context.Context, ns, name, reason string) ([]string, error) {
	list, err := e.CS.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason,
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Message)
	}
	return out, nil
}

// RunLogs returns the logs of the pods of one run of a TrainingJob, by pod
// name (the platform's job-name and run labels select them).
func (e *Env) RunLogs(ctx context.Context, tj *trainingv1alpha1.TrainingJob, run int32) (map[string]string, error) {
	var pods corev1.PodList
	if err := e.C.List(ctx, &pods, client.InNamespace(tj.Namespace), client.MatchingLabels{
		trainingv1alpha1.LabelJobName: tj.Name, trainingv1alpha1.LabelRun: strconv.Itoa(int(run)),
	}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = cluster.PodLogs(e.CS, p.Namespace, p.Name)
	}
	return out, nil
}

// JobLogs is every pod's log of one run of tj, one after the other.
func JobLogs(t *testing.T, e *Env, tj *trainingv1alpha1.TrainingJob, run int32) string {
	t.Helper()
	logs, err := e.RunLogs(t.Context(), tj, run)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for name, l := range logs {
		fmt.Fprintf(&b, "== %s\n%s\n", name, l)
	}
	return b.String()
}
