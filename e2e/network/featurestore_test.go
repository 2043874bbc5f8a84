package network

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/notebooks"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// storeReadyTimeout bounds a managed FeatureStore from creation to Ready on
// the loaded nightly machine: two StatefulSets to start (PostgreSQL
// initialises its data directory) and the operator's logins.
const storeReadyTimeout = 10 * time.Minute

// TestFeatureStoreServersAdmitOnlyBoundPods: the NetworkPolicy of a
// FeatureStore's managed servers lets the operator through (the store
// becomes Ready, which takes the operator's logins to its PostgreSQL and
// Redis) and the pods bound to it: rank 0 of a TrainingJob (native
// backend) and a Notebook's kernel that reference it reach its servers and
// are refused by those of a second store of the namespace that they do not
// reference. A pod of the namespace that is not bound, and a pod of
// another namespace that carries the store's binding label, are refused
// while they reach an unguarded server in the store's namespace, so the
// refusal is the policy's.
func TestFeatureStoreServersAdmitOnlyBoundPods(t *testing.T) {
	t.Parallel()
	e := steps.Connect(t)
	cluster.RequireNetworkPolicyEnforcement(t, e.CS)
	ns := e.Namespace(t, "e2e-net-fs")
	other := e.Namespace(t, "e2e-net-fs-other")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	bound := createManagedStore(t, e, ns, "bound")
	unbound := createManagedStore(t, e, ns, "unbound")
	openURL, err := url.Parse(openServer(t, e, ns, image))
	if err != nil {
		t.Fatal(err)
	}
	open := openURL.Host
	for _, fs := range []*featuresv1alpha1.FeatureStore{bound, unbound} {
		e.WaitCondition(t, fs, "Ready", metav1.ConditionTrue, "Stalled", storeReadyTimeout)
	}
	t.Run("operator", func(t *testing.T) {
		for _, fs := range []*featuresv1alpha1.FeatureStore{bound, unbound} {
			var np networkingv1.NetworkPolicy
			if err := e.C.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: fs.Name + "-managed-servers"}, &np); err != nil {
				t.Errorf("FeatureStore %s is Ready, but its servers' NetworkPolicy: %v", fs.Name, err)
				continue
			}
			t.Logf("FeatureStore %s/%s Ready behind NetworkPolicy %s: the operator logged in to %s and %s", ns, fs.Name, np.Name,
				fs.Status.OfflineStore.Endpoint, fs.Status.OnlineStore.Endpoint)
		}
	})
	mine, theirs := servers(bound), servers(unbound)

	t.Run("TrainingJob", func(t *testing.T) {
		t.Parallel()
		tj := connectionJob(ns, "bound", steps.Image(t, "pytorch"), "")
		tj.Spec.Command = []string{"/usr/bin/python3", "-c", cluster.TCPConnectionScript(mine, theirs)}
		tj.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("256Mi")
		tj.Spec.FeatureStores = references(bound)
		if err := e.C.Create(t.Context(), tj); err != nil {
			t.Fatalf("create TrainingJob: %v", err)
		}
		e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
		logs, err := e.RunLogs(t.Context(), tj, tj.Status.Run)
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) != 1 {
			t.Fatalf("want the logs of one rank, got %d", len(logs))
		}
		for pod, l := range logs {
			judge(t, fmt.Sprintf("rank 0 (%s/%s) of TrainingJob %s", ns, pod, tj.Name), l, mine, theirs)
		}
	})
	t.Run("Notebook", func(t *testing.T) {
		t.Parallel()
		nb := notebooks.NewNotebook(t, ns, "bound", false)
		nb.Spec.FeatureStores = references(bound)
		notebooks.CreateReady(t, e, nb)
		out := e.MustRun(t, ns, notebooks.KernelPod(t, nb, "bound-kernel", cluster.TCPConnectionScript(mine, theirs)))
		judge(t, fmt.Sprintf("the kernel of Notebook %s/%s", ns, nb.Name), out, mine, theirs)
	})
	t.Run("unbound", func(t *testing.T) {
		t.Parallel()
		expectTCP(t, e, ns, tcpClientPod(t, "stranger", nil), []string{open}, mine)
	})
	t.Run("other namespace", func(t *testing.T) {
		t.Parallel()
		// The store's own binding label does not help a pod of another
		// namespace.
		outsider := tcpClientPod(t, "outsider", map[string]string{commonv1alpha1.FeatureStoreBindingLabel(bound.Name): commonv1alpha1.FeatureStoreBindingLabelValue})
		expectTCP(t, e, other, outsider, []string{open}, mine)
	})
}

// createManagedStore creates a FeatureStore in ns whose stores all run on
// its own managed servers.
func createManagedStore(t *testing.T, e *steps.Env, ns, name string) *featuresv1alpha1.FeatureStore {
	t.Helper()
	managed := func(memory string) *featuresv1alpha1.ManagedServer {
		return &featuresv1alpha1.ManagedServer{
			Storage: ptrQuantity("64Mi"),
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
			},
		}
	}
	fs := &featuresv1alpha1.FeatureStore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: featuresv1alpha1.FeatureStoreSpec{
			Project:        name,
			OnlineStore:    featuresv1alpha1.StoreSource{Managed: managed("128Mi")},
			OfflineStore:   featuresv1alpha1.StoreSource{Managed: managed("256Mi")},
			Registry:       featuresv1alpha1.StoreSource{Managed: managed("256Mi")},
			DeletionPolicy: commonv1alpha1.DeletionPolicyDelete,
		},
	}
	if err := e.C.Create(t.Context(), fs); err != nil {
		t.Fatalf("create FeatureStore %s: %v", name, err)
	}
	return fs
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// servers are the host:port of a managed FeatureStore's PostgreSQL and
// Redis, through their Services, as its client configuration names them.
func servers(fs *featuresv1alpha1.FeatureStore) []string {
	return []string{
		fmt.Sprintf("%s-postgres.%s.svc:5432", fs.Name, fs.Namespace),
		fmt.Sprintf("%s-redis.%s.svc:6379", fs.Name, fs.Namespace),
	}
}

func references(fs *featuresv1alpha1.FeatureStore) []commonv1alpha1.FeatureStoreReference {
	return []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: fs.Name}}}
}

// tcpClientPod is a steps.ClientPod in the platform's PyTorch image (for
// its python3), with labels added.
func tcpClientPod(t *testing.T, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	pod := steps.ClientPod(name, steps.Image(t, "pytorch"), "")
	for k, v := range labels {
		pod.Labels[k] = v
	}
	return pod
}

// expectTCP runs pod with cluster.TCPConnectionScript and fails the test
// unless it reached every target of reach and was refused by every target
// of deny.
func expectTCP(t *testing.T, e *steps.Env, ns string, pod *corev1.Pod, reach, deny []string) {
	t.Helper()
	pod.Spec.Containers[0].Command = []string{"/usr/bin/python3", "-c", cluster.TCPConnectionScript(reach, deny)}
	judge(t, fmt.Sprintf("%s/%s (labels %v)", ns, pod.Name, pod.Labels), e.MustRun(t, ns, pod), reach, deny)
}

// judge reads the output of cluster.TCPConnectionScript(reach, deny) run
// by who.
func judge(t *testing.T, who, logs string, reach, deny []string) {
	t.Helper()
	if err := cluster.JudgeConnections(logs, reach, deny); err != nil {
		t.Errorf("%s, expected to reach %v and be refused by %v: %v\n%s", who, reach, deny, err, logs)
		return
	}
	t.Logf("%s: reached %v, refused by %v (%d rounds)", who, reach, deny, strings.Count(logs, "round "))
}
