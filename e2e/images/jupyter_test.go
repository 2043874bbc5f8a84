package images

import (
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/ml-platform/ml-platform/e2e/cluster"
)

const jupyterToken = "e2e-token-0123456789abcdef"

// jupyterPod is the pod the Notebook operator generates
// (operators/notebook/internal/render), reduced to what the image relies
// on: NB_PREFIX, JUPYTER_PORT, HOME on a volume, JUPYTER_TOKEN from a
// Secret, uid 1000, a read-only root filesystem, the /api readiness probe.
func jupyterPod(img, prefix string) *corev1.Pod {
	pod := restrictedPod("notebook", img, 1000, 100)
	pod.Labels["service"] = "notebook"
	c := &pod.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8888}}
	c.Env = []corev1.EnvVar{
		{Name: "NB_PREFIX", Value: prefix},
		{Name: "JUPYTER_PORT", Value: "8888"},
		{Name: "HOME", Value: "/home/jovyan"},
		{Name: "JUPYTER_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "notebook-token"}, Key: "token",
		}}},
	}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: prefix + "api", Port: intstr.FromString("http")}},
		PeriodSeconds: 2,
	}
	mount(pod, "workspace", "/home/jovyan", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})
	return pod
}

// jupyter calls the server through the API server's service proxy. The
// token goes in the query: the API server drops the Authorization header
// of proxied requests.
func jupyter(t *testing.T, cs kubernetes.Interface, ns, method, path string, token bool) (int, []byte) {
	t.Helper()
	req := cs.CoreV1().RESTClient().Verb(method).Namespace(ns).Resource("services").Name("notebook:8888").SubResource("proxy").Suffix(path)
	if token {
		req = req.Param("token", jupyterToken)
	}
	res := req.Do(t.Context())
	var code int
	res.StatusCode(&code)
	body, err := res.Raw()
	if err != nil && !apierrors.IsForbidden(err) && code == 0 {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, body
}

// TestJupyterServesUnderRestrictedProfile runs the Jupyter image as the
// Notebook operator does, in a namespace that enforces the restricted
// profile, and uses the REST API the culler reads.
func TestJupyterServesUnderRestrictedProfile(t *testing.T) {
	cs := cluster.Client(t)
	ns := restrictedNamespace(t, cs)
	prefix := "/notebook/" + ns + "/notebook/"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "notebook-token"}, StringData: map[string]string{"token": jupyterToken}}
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createService(t, cs, ns, "notebook", 8888, false)
	createPod(t, cs, ns, jupyterPod(image(t, "jupyter"), prefix))
	waitReady(t, cs, ns, "notebook")

	if code, body := jupyter(t, cs, ns, http.MethodGet, prefix+"api/status", false); code != http.StatusForbidden {
		t.Errorf("GET api/status without token: %d %s, want 403", code, body)
	}
	code, body := jupyter(t, cs, ns, http.MethodGet, prefix+"api/status", true)
	var status struct {
		LastActivity string `json:"last_activity"`
		Kernels      *int   `json:"kernels"`
		Connections  *int   `json:"connections"`
	}
	if err := json.Unmarshal(body, &status); code != http.StatusOK || err != nil || status.LastActivity == "" || status.Kernels == nil {
		t.Fatalf("GET api/status with token: %d %s (%v)", code, body, err)
	}

	code, body = jupyter(t, cs, ns, http.MethodPost, prefix+"api/kernels", true)
	var kernel struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &kernel); code != http.StatusCreated || err != nil || kernel.ID == "" {
		t.Fatalf("POST api/kernels: %d %s (%v)", code, body, err)
	}
	// The kernel's first status can be lost before the server subscribes
	// (ZeroMQ slow joiner), so it may stay "starting" until a client
	// connects: what counts is that the server lists it as a live kernel.
	code, body = jupyter(t, cs, ns, http.MethodGet, prefix+"api/kernels/"+kernel.ID, true)
	var k struct {
		ExecutionState string `json:"execution_state"`
		LastActivity   string `json:"last_activity"`
	}
	if err := json.Unmarshal(body, &k); code != http.StatusOK || err != nil || k.ExecutionState == "" || k.ExecutionState == "dead" || k.LastActivity == "" {
		t.Errorf("GET api/kernels/%s: %d %s (%v), want a live kernel with last_activity", kernel.ID, code, body, err)
	}

	code, body = jupyter(t, cs, ns, http.MethodPost, prefix+"api/terminals", true)
	var term struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(body, &term); code != http.StatusOK || err != nil || term.Name == "" {
		t.Fatalf("POST api/terminals: %d %s (%v)", code, body, err)
	}
	code, body = jupyter(t, cs, ns, http.MethodGet, prefix+"api/terminals", true)
	var terms []struct {
		Name         string `json:"name"`
		LastActivity string `json:"last_activity"`
	}
	if err := json.Unmarshal(body, &terms); code != http.StatusOK || err != nil || len(terms) != 1 || terms[0].Name != term.Name || terms[0].LastActivity == "" {
		t.Errorf("GET api/terminals: %d %s (%v), want terminal %s with last_activity", code, body, err, term.Name)
	}
}
