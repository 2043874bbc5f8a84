package network

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/notebooks"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// openPort is where the unguarded control server listens.
const openPort = 8080

// TestNotebookAdmitsProberAndListedPodsOnly: the Notebook's NetworkPolicy
// lets the operator's prober through (the Notebook becomes Ready, which
// takes a successful call to Jupyter's REST API from the operator's pod) and
// the suite's client pods of its namespace (spec.access.allowFrom), and
// refuses a pod of the namespace without the client label and a pod of
// another namespace with it. Every refused pod reaches an unguarded server
// in the Notebook's namespace, so the refusal is the policy's.
func TestNotebookAdmitsProberAndListedPodsOnly(t *testing.T) {
	t.Parallel()
	e := steps.Connect(t)
	cluster.RequireNetworkPolicyEnforcement(t, e.CS)
	ns := e.Namespace(t, "e2e-net-notebook")
	other := e.Namespace(t, "e2e-net-other")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	open := openServer(t, e, ns, image)

	nb := notebooks.NewNotebook(t, ns, "guarded", false)
	notebooks.CreateReady(t, e, nb)
	var policy networkingv1.NetworkPolicy
	if err := e.C.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: nb.Name}, &policy); err != nil {
		t.Fatalf("the Notebook is Ready, but its NetworkPolicy: %v", err)
	}
	t.Logf("Notebook %s/%s Ready behind NetworkPolicy %s: the operator's prober reached Jupyter", ns, nb.Name, policy.Name)

	jupyter := nb.Status.URL
	expect(t, e, ns, steps.ClientPod("listed", image, ""), []string{jupyter, open}, nil)
	stranger := steps.ClientPod("stranger", image, "")
	stranger.Labels = map[string]string{"e2e-client": "stranger"}
	expect(t, e, ns, stranger, []string{open}, []string{jupyter})
	expect(t, e, other, steps.ClientPod("outsider", image, ""), []string{open}, []string{jupyter})
}

// expect runs pod (a steps.ClientPod) with cluster.ConnectionScript and
// fails the test unless it reached every URL of reach and was refused by
// every URL of deny (cluster.JudgeConnections).
func expect(t *testing.T, e *steps.Env, ns string, pod *corev1.Pod, reach, deny []string) {
	t.Helper()
	pod.Spec.Containers[0].Command = []string{"sh", "-c", cluster.ConnectionScript(reach, deny)}
	logs := e.MustRun(t, ns, pod)
	if err := cluster.JudgeConnections(logs, reach, deny); err != nil {
		t.Errorf("%s/%s (labels %v), expected to reach %v and be refused by %v: %v\n%s", ns, pod.Name, pod.Labels, reach, deny, err, logs)
		return
	}
	t.Logf("%s/%s (labels %v): reached %v, refused by %v (%d rounds)", ns, pod.Name, pod.Labels, reach, deny, strings.Count(logs, "round "))
}

// openServer starts a web server that no policy selects and returns its URL.
func openServer(t *testing.T, e *steps.Env, ns, image string) string {
	t.Helper()
	pod := steps.ClientPod("open", image, fmt.Sprintf("mkdir -p /tmp/www && echo open > /tmp/www/index.html && exec httpd -f -p %d -h /tmp/www", openPort))
	pod.Labels = map[string]string{"app": "open"}
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(openPort)}},
		PeriodSeconds: 1,
	}
	e.Started(t, ns, pod)
	var ip string
	steps.Until(t, "the open server to be ready", steps.PodTimeout, func(ctx context.Context) (bool, error) {
		p, err := e.CS.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip = p.Status.PodIP
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue && ip != "", nil
			}
		}
		return false, nil
	})
	return fmt.Sprintf("http://%s:%d/", ip, openPort)
}
