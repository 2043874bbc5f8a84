package network

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/notebooks"
	"github.com/ml-platform/ml-platform/e2e/steps"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

// rolloutTimeout bounds the Notebook operator's rollout after a change of
// its configuration, on the loaded nightly machine.
const rolloutTimeout = steps.PodTimeout

// egressProbe is Python run in a Notebook's kernel: like
// cluster.ConnectionScript, once a second it resolves every name of
// $RESOLVE and connects to every host:port of $REACH and $DENY, printing
// "round N: reach=X ... refused=Y ..." (a name as dns://NAME, an address as
// tcp://HOST:PORT), until three rounds in a row had the expected outcome,
// or a round after such a one differed, or ConnectionAttempts rounds
// passed; cluster.JudgeConnections reads the lines.
const egressProbe = `
import os, socket, time
def ok(target):
    kind, _, where = target.partition("://")
    try:
        if kind == "dns":
            socket.getaddrinfo(where, None)
        else:
            host, _, port = where.rpartition(":")
            socket.create_connection((host, int(port)), timeout=5).close()
        return True
    except OSError:
        return False
reach, deny = os.environ["REACH"].split(), os.environ["DENY"].split()
want = "".join(" reach=" + t for t in reach) + "".join(" refused=" + t for t in deny)
good = 0
for i in range(1, int(os.environ["ROUNDS"]) + 1):
    line = "".join((" reach=" if ok(t) else " refused=") + t for t in reach + deny)
    print("round %d:%s" % (i, line), flush=True)
    if line == want:
        good += 1
        if good >= 3:
            break
    elif good:
        break
    time.sleep(1)
`

// TestNotebookEgressAdmitsDNSAndListedDestinationsOnly turns the Notebook
// operator's egress policy on for its duration (its configuration, as the
// chart's notebooks.networkPolicy.egress renders it, with one listed
// destination: a server's pods in another namespace), then from a kernel
// of a Ready Notebook bound to a managed FeatureStore resolves a cluster
// name through kube-dns and connects to the listed server and to the
// store's PostgreSQL and Redis, and is refused by an unguarded server of
// its own namespace that the list does not name, which a plain pod of the
// namespace reaches. It runs alone (not in parallel): the operator
// restarts twice.
func TestNotebookEgressAdmitsDNSAndListedDestinationsOnly(t *testing.T) {
	e := steps.Connect(t)
	cluster.RequireNetworkPolicyEnforcement(t, e.CS)
	ns := e.Namespace(t, "e2e-net-egress")
	listedNS := e.Namespace(t, "e2e-net-listed")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	unlisted := openServer(t, e, ns, image)
	listed := openServer(t, e, listedNS, image)
	withNotebookEgress(t, e, map[string]any{
		"enabled": true,
		"dns":     map[string]any{"namespace": "kube-system", "podLabels": map[string]any{"k8s-app": "kube-dns"}},
		"to": []any{map[string]any{
			"to": []any{map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: listedNS}},
				"podSelector":       map[string]any{"matchLabels": map[string]any{"app": "open"}},
			}},
			"ports": []any{map[string]any{"port": openPort, "protocol": "TCP"}},
		}},
	})

	store := managedStore(ns, "bound")
	if err := e.C.Create(t.Context(), store); err != nil {
		t.Fatalf("create FeatureStore: %v", err)
	}
	e.WaitCondition(t, store, "Ready", metav1.ConditionTrue, "Stalled", storeTimeout)
	servers := storeServers(t, e, ns, store.Name)

	nb := notebooks.NewNotebook(t, ns, "egress", false)
	nb.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: store.Name}}}
	notebooks.CreateReady(t, e, nb)
	dns := "dns://kubernetes.default.svc.cluster.local"
	reach := append([]string{dns, tcpTarget(listed)}, servers...)
	deny := []string{tcpTarget(unlisted)}
	// The kernel inherits the Notebook's environment, not the client's:
	// the probe's inputs are in its code.
	code := fmt.Sprintf("import os\nos.environ.update(REACH=%q, DENY=%q, ROUNDS=%q)\n%s", strings.Join(reach, " "), strings.Join(deny, " "), fmt.Sprint(cluster.ConnectionAttempts), egressProbe)
	out := e.MustRun(t, ns, notebooks.KernelPod(t, nb, "kernel", code))
	if err := cluster.JudgeConnections(out, reach, deny); err != nil {
		t.Errorf("a kernel of Notebook %s/%s behind its egress policy, expected to reach %v and be refused by %v: %v\n%s", ns, nb.Name, reach, deny, err, out)
	} else {
		t.Logf("a kernel of Notebook %s/%s: reached %v, refused by %v (%d rounds)", ns, nb.Name, reach, deny, strings.Count(out, "round "))
	}
	// The refused server is reachable: the refusal is the Notebook's policy.
	expect(t, e, ns, steps.ClientPod("neighbour", image, ""), []string{unlisted}, nil)
}

// storeTimeout bounds a managed FeatureStore's way to Ready: two servers
// with their claims, images and the operator's checks.
const storeTimeout = 15 * time.Minute

// managedStore is a FeatureStore whose stores all run on the servers the
// FeatureStore operator manages for it.
func managedStore(ns, name string) *featuresv1alpha1.FeatureStore {
	server := func(memory string) *featuresv1alpha1.ManagedServer {
		return &featuresv1alpha1.ManagedServer{
			Storage: ptr.To(resource.MustParse("64Mi")),
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
			},
		}
	}
	return &featuresv1alpha1.FeatureStore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: featuresv1alpha1.FeatureStoreSpec{
			Project:        "e2e_egress",
			OnlineStore:    featuresv1alpha1.StoreSource{Managed: server("256Mi")},
			OfflineStore:   featuresv1alpha1.StoreSource{Managed: server("512Mi")},
			Registry:       featuresv1alpha1.StoreSource{Managed: server("512Mi")},
			DeletionPolicy: commonv1alpha1.DeletionPolicyDelete,
		},
	}
}

// storeServers are the egressProbe targets of the running managed servers
// of FeatureStore store (its PostgreSQL and its Redis), found by the labels
// the Notebook's egress policy selects them by.
func storeServers(t *testing.T, e *steps.Env, ns, store string) []string {
	t.Helper()
	var pods corev1.PodList
	if err := e.C.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels(featureref.ServerSelector(store))); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || len(p.Spec.Containers[0].Ports) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("tcp://%s:%d", p.Status.PodIP, p.Spec.Containers[0].Ports[0].ContainerPort))
	}
	if len(out) != 2 {
		t.Fatalf("FeatureStore %s/%s is Ready with %d running servers labelled %v, want its PostgreSQL and its Redis", ns, store, len(out), featureref.ServerSelector(store))
	}
	return out
}

// tcpTarget is the egressProbe target of an openServer URL.
func tcpTarget(url string) string {
	return "tcp://" + strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
}

// withNotebookEgress sets networkPolicy.egress in the Notebook operator's
// configuration (the chart's ConfigMap), rolls the operator and waits for
// it; when the test ends, the configuration and the pod template are put
// back and the operator rolled again.
func withNotebookEgress(t *testing.T, e *steps.Env, egress map[string]any) {
	t.Helper()
	d := e.OperatorDeployment(t, "notebook-operator")
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: d.Namespace, Name: d.Name + "-config"}
	if err := e.C.Get(t.Context(), key, cm); err != nil {
		t.Fatalf("the Notebook operator's configuration: %v", err)
	}
	original := cm.Data["config.yaml"]
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(original), &cfg); err != nil {
		t.Fatal(err)
	}
	np, _ := cfg["networkPolicy"].(map[string]any)
	if np == nil {
		t.Fatalf("the Notebook operator's configuration has no networkPolicy:\n%s", original)
	}
	np["egress"] = egress
	changed, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	annotations := d.Spec.Template.Annotations
	t.Cleanup(func() {
		// A fresh context: the test's is cancelled by now.
		ctx := context.Background()
		if err := configure(ctx, e, key, original, annotations); err != nil {
			t.Errorf("restoring the Notebook operator's configuration: %v", err)
			return
		}
		if err := wait.PollUntilContextTimeout(ctx, steps.Poll, rolloutTimeout, true, rolledOut(e, key.Namespace, d.Name)); err != nil {
			t.Errorf("waiting for the Notebook operator to roll back: %v", err)
		}
	})
	sum := sha256.Sum256(changed)
	with := map[string]string{"e2e.mlplatform.dev/config": hex.EncodeToString(sum[:8])}
	for k, v := range annotations {
		with[k] = v
	}
	if err := configure(t.Context(), e, key, string(changed), with); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, e, key.Namespace, d.Name)
	t.Logf("the Notebook operator runs with networkPolicy.egress %v", egress)
}

// configure writes the operator's configuration and its pod template's
// annotations, which rolls it when they changed.
func configure(ctx context.Context, e *steps.Env, key client.ObjectKey, config string, annotations map[string]string) error {
	cm := &corev1.ConfigMap{}
	if err := e.C.Get(ctx, key, cm); err != nil {
		return err
	}
	cm.Data["config.yaml"] = config
	if err := e.C.Update(ctx, cm); err != nil {
		return err
	}
	d, err := e.CS.AppsV1().Deployments(key.Namespace).Get(ctx, strings.TrimSuffix(key.Name, "-config"), metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Spec.Template.Annotations = annotations
	_, err = e.CS.AppsV1().Deployments(key.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	return err
}

func waitRolledOut(t *testing.T, e *steps.Env, ns, name string) {
	t.Helper()
	steps.Until(t, "the Notebook operator to roll out", rolloutTimeout, rolledOut(e, ns, name))
}

// rolledOut holds once the Deployment ns/name runs its current template
// only.
func rolledOut(e *steps.Env, ns, name string) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		d, err := e.CS.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return e.RolledOut(ctx, d)
	}
}
