package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// InfoNamespace and InfoConfigMap name the ConfigMap in which the offline kind
// cluster (hack/kind/manifests/default-cni.yaml) describes what it provides.
// Clusters without it are assumed to be complete.
const (
	InfoNamespace = "kube-system"
	InfoConfigMap = "ml-platform-kind"
)

// NetworkPolicyNotEnforced is the reason tests that need NetworkPolicy
// enforcement are skipped on clusters that do not enforce it.
const NetworkPolicyNotEnforced = "this cluster says it does not enforce NetworkPolicy (" + InfoNamespace + "/" + InfoConfigMap +
	": networkPolicyEnforcement is \"false\"): the offline kind cluster enforces it only when make kind-up " +
	"deployed its policy engine (kube-router's firewall; not with KIND_NETWORK_POLICY=0); run this test on a cluster that enforces NetworkPolicy"

// RESTConfig loads the cluster's client configuration the way kubectl does:
// $KUBECONFIG, then ~/.kube/config. make e2e-* sets KUBECONFIG to the kind
// cluster's kubeconfig.
func RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// E2EEnv is set to 1 by the make e2e-* targets. make test runs every
// module's tests, e2e included, and no cluster is expected there.
const E2EEnv = "ML_PLATFORM_E2E"

// Client returns a clientset for the cluster under test. It skips the test
// unless $ML_PLATFORM_E2E is 1, and fails it with a hint when that is set but
// no cluster can be reached.
func Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	if os.Getenv(E2EEnv) != "1" {
		t.Skipf("e2e test: needs a cluster and %s=1 (make kind-up, then make e2e-smoke-cluster)", E2EEnv)
	}
	cfg, err := RESTConfig()
	if err != nil {
		t.Fatalf("no cluster to test (create one with make kind-up; make e2e-* sets KUBECONFIG): %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client for %s: %v", cfg.Host, err)
	}
	return cs
}

// NetworkPolicyEnforced reports whether the cluster enforces NetworkPolicy.
// Only a cluster that says otherwise in its info ConfigMap is taken not to.
func NetworkPolicyEnforced(ctx context.Context, cs kubernetes.Interface) (bool, error) {
	cm, err := cs.CoreV1().ConfigMaps(InfoNamespace).Get(ctx, InfoConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s/%s: %w", InfoNamespace, InfoConfigMap, err)
	}
	return cm.Data["networkPolicyEnforcement"] != "false", nil
}

// RequireNetworkPolicyEnforcement skips the test, with NetworkPolicyNotEnforced
// as the reason, on clusters that do not enforce NetworkPolicy, and only there.
func RequireNetworkPolicyEnforcement(t testing.TB, cs kubernetes.Interface) {
	t.Helper()
	enforced, err := NetworkPolicyEnforced(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if !enforced {
		t.Skip(NetworkPolicyNotEnforced)
	}
}

// BusyboxImage returns the busybox image preloaded on every node for test
// pods (sh, wget, nslookup, httpd), so that tests never pull.
func BusyboxImage(ctx context.Context, cs kubernetes.Interface) (string, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	found := map[string]int{}
	for _, n := range nodes.Items {
		for _, name := range busyboxNames(n.Status.Images) {
			found[name]++
		}
	}
	for name, count := range found {
		if count == len(nodes.Items) {
			return name, nil
		}
	}
	return "", fmt.Errorf("no busybox image (localhost/ml-platform/kind/busybox) is preloaded on all %d nodes", len(nodes.Items))
}

func busyboxNames(images []corev1.ContainerImage) []string {
	var out []string
	for _, img := range images {
		for _, name := range img.Names {
			if strings.Contains(name, "/ml-platform/kind/busybox:") {
				out = append(out, name)
			}
		}
	}
	return out
}

// PodLogs returns a pod's logs, or a note saying why there are none, for
// failure messages.
func PodLogs(cs kubernetes.Interface, ns, name string) string {
	rc, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).Stream(context.Background())
	if err != nil {
		return fmt.Sprintf("(no logs: %v)", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Sprintf("(logs incomplete: %v)\n%s", err, b)
	}
	return string(b)
}

// DumpNamespace logs the pods (with logs) and events a failed test left:
// the test output is the artifact a CI run keeps.
func DumpNamespace(t testing.TB, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	if pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s/%s: phase %s, conditions %+v, container statuses %+v", ns, p.Name, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
			t.Logf("pod %s/%s logs:\n%s", ns, p.Name, PodLogs(cs, ns, p.Name))
		}
	}
	if events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s/%s: %s %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}
