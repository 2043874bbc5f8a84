package network

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/quickstart"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// trainTimeout bounds a busybox TrainingJob from creation to Succeeded on
// the loaded nightly machine: a pod to schedule and start, the rounds of
// ConnectionScript, the operator to see the Job complete.
const trainTimeout = 10 * time.Minute

// TestOperatorMetricsAdmitOnlyTheScraper: the operators' NetworkPolicy
// (charts' networkPolicy.metricsFrom, by default the Prometheus Operator's
// pods, app.kubernetes.io/name: prometheus, of any namespace) lets such a
// pod reach every operator's metrics port and refuses a pod without the
// label, which still reaches an unguarded server.
func TestOperatorMetricsAdmitOnlyTheScraper(t *testing.T) {
	t.Parallel()
	e := steps.Connect(t)
	cluster.RequireNetworkPolicyEnforcement(t, e.CS)
	ns := e.Namespace(t, "e2e-net-metrics")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	open := openServer(t, e, ns, image)
	var metrics []string
	for _, op := range quickstart.Operators {
		metrics = append(metrics, operatorURL(t, e, op, "metrics", "/metrics"))
	}

	scraper := steps.ClientPod("scraper", image, "")
	scraper.Labels = map[string]string{"app.kubernetes.io/name": "prometheus", "e2e-client": "scraper"}
	expect(t, e, ns, scraper, append([]string{open}, metrics...), nil)
	expect(t, e, ns, steps.ClientPod("stranger", image, ""), []string{open}, metrics)
}

// TestProgressEndpointAdmitsOnlyTrainingPods: rank 0 of a real TrainingJob
// (native backend, busybox as its image) reaches the operator's progress
// endpoint through its Service, as training pods report there; a pod of the
// same namespace that the operator did not create is refused, while it
// reaches an unguarded server.
func TestProgressEndpointAdmitsOnlyTrainingPods(t *testing.T) {
	t.Parallel()
	e := steps.Connect(t)
	cluster.RequireNetworkPolicyEnforcement(t, e.CS)
	ns := e.Namespace(t, "e2e-net-progress")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	open := openServer(t, e, ns, image)
	progress := progressURL(t, e)

	reach := []string{open, progress}
	tj := connectionJob(ns, "rank", image, cluster.ConnectionScript(reach, nil))
	if err := e.C.Create(t.Context(), tj); err != nil {
		t.Fatalf("create TrainingJob: %v", err)
	}
	e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
	logs, err := e.RunLogs(t.Context(), tj, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 {
		t.Fatalf("want the logs of one rank, got %d", len(logs))
	}
	for pod, l := range logs {
		if err := cluster.JudgeConnections(l, reach, nil); err != nil {
			t.Errorf("rank 0 (%s/%s) of TrainingJob %s, expected to reach %v: %v\n%s", ns, pod, tj.Name, reach, err, l)
		} else {
			t.Logf("rank 0 (%s/%s) of TrainingJob %s: reached %v (%d rounds)", ns, pod, tj.Name, reach, strings.Count(l, "round "))
		}
	}
	expect(t, e, ns, steps.ClientPod("stranger", image, ""), []string{open}, []string{progress})
}

// connectionJob is a one-worker TrainingJob on the native backend whose
// only rank runs script with busybox and keeps its pod for its logs.
func connectionJob(ns, name, image, script string) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: "pytorch",
			Backend:   "native",
			Image:     image,
			Command:   []string{"sh", "-c", script},
			Workers:   1,
			Resources: &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			}},
			RunPolicy: trainingv1alpha1.RunPolicy{CleanPodPolicy: "None"},
		},
	}
}

// operatorURL is an https URL of port (by its name) on a running pod of
// operator, with path.
func operatorURL(t *testing.T, e *steps.Env, operator, port, path string) string {
	t.Helper()
	d := e.OperatorDeployment(t, operator)
	var number int32
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				number = p.ContainerPort
			}
		}
	}
	if number == 0 {
		t.Fatalf("Deployment %s has no port %q", d.Name, port)
	}
	var pods corev1.PodList
	if err := e.C.List(t.Context(), &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return fmt.Sprintf("https://%s:%d%s", p.Status.PodIP, number, path)
		}
	}
	t.Fatalf("no running pod of %s", d.Name)
	return ""
}

// progressURL is the endpoint the TrainingJob operator gives training pods
// (its --progress-url argument): the progress Service.
func progressURL(t *testing.T, e *steps.Env) string {
	t.Helper()
	d := e.OperatorDeployment(t, "trainingjob-operator")
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if u, ok := strings.CutPrefix(a, "--progress-url="); ok {
				return u + "/"
			}
		}
	}
	t.Fatalf("Deployment %s has no --progress-url: progress.enabled is off", d.Name)
	return ""
}
