package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ml-platform/ml-platform/e2e/cluster"
)

const (
	pollInterval = time.Second
	// Bounds, not expectations: the build machines are shared.
	podTimeout = 5 * time.Minute
)

// image is the reference hack/images/build.sh gives the Debian image NAME:
// its tag is images/NAME/tag in this repository.
func image(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "images", name, "tag"))
	if err != nil {
		t.Fatal(err)
	}
	return "localhost/ml-platform/" + name + ":" + strings.TrimSpace(string(b))
}

// restrictedNamespace creates a namespace that enforces the restricted Pod
// Security Standard and deletes it afterwards; it also fails the test when
// a pod in it pulled an image.
func restrictedNamespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "images-",
		Labels: map[string]string{
			"app.kubernetes.io/part-of":          "ml-platform-e2e",
			"pod-security.kubernetes.io/enforce": "restricted",
		},
	}}
	created, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if events, err := cs.CoreV1().Events(created.Name).List(ctx, metav1.ListOptions{FieldSelector: "reason=Pulling"}); err == nil {
			for _, e := range events.Items {
				t.Errorf("%s pulled an image: %s", e.InvolvedObject.Name, e.Message)
			}
		}
		if t.Failed() {
			cluster.DumpNamespace(t, cs, created.Name)
		}
		err := cs.CoreV1().Namespaces().Delete(ctx, created.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", created.Name, err)
		}
	})
	return created.Name
}

// restrictedPod is a pod that passes the restricted profile with a
// read-only root filesystem and an emptyDir on /tmp, as the operators
// generate them.
func restrictedPod(name, img string, uid, gid int64, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To(uid),
				RunAsGroup:     ptr.To(gid),
				FSGroup:        ptr.To(gid),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           img,
				ImagePullPolicy: corev1.PullNever,
				Args:            args,
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

func mount(pod *corev1.Pod, name, path string, src corev1.VolumeSource) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: src})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
}

func claim(name string) corev1.VolumeSource {
	return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
}

func createClaim(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createService(t *testing.T, cs kubernetes.Interface, ns, name string, port int32, headless bool) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"service": name},
			Ports:    []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(port)}},
		},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.PublishNotReadyAddresses = true
	}
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPod(t *testing.T, cs kubernetes.Interface, ns string, pod *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deletePod kills a pod at once and waits until it is gone, so its
// volume and name are free again.
func deletePod(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	err := cs.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod "+name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// waitFinished waits until the pod succeeded or failed and returns whether
// it succeeded, with its logs.
func waitFinished(t *testing.T, cs kubernetes.Interface, ns, name string) (bool, string) {
	t.Helper()
	var phase corev1.PodPhase
	waitFor(t, "pod "+name+" to finish", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	return phase == corev1.PodSucceeded, cluster.PodLogs(cs, ns, name)
}

func waitReady(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	waitFor(t, "pod "+name+" to be ready", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod %s ended %s:\n%s", name, p.Status.Phase, cluster.PodLogs(cs, ns, name))
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

func waitFor(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), pollInterval, podTimeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
