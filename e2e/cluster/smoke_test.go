package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The infrastructure smoke test of the offline kind cluster: what every
// later e2e suite relies on. The tests run in file order; the last one checks
// that nothing, including these tests' own pods, pulled an image.

const (
	pollInterval = time.Second
	// Bounds, not expectations: pods start in seconds on an idle node, but
	// the build machines are shared.
	podTimeout = 3 * time.Minute
)

func TestNodesReady(t *testing.T) {
	cs := Client(t)
	ctx := t.Context()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("the cluster has no nodes")
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready: %+v", n.Name, n.Status.Conditions)
		}
		t.Logf("node %s: kubelet %s, %s, allocatable cpu %s memory %s", n.Name, n.Status.NodeInfo.KubeletVersion,
			n.Status.NodeInfo.ContainerRuntimeVersion, n.Status.Allocatable.Cpu(), n.Status.Allocatable.Memory())
	}
}

func TestSystemPodsRunning(t *testing.T) {
	cs := Client(t)
	ctx := t.Context()
	var notReady []string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, podTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		notReady = nil
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || !podReady(&p) {
				notReady = append(notReady, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
			}
		}
		return len(pods.Items) > 0 && len(notReady) == 0, nil
	})
	if err != nil {
		t.Fatalf("kube-system pods not all Running and Ready: %v: %v", notReady, err)
	}
	for _, component := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "coredns"} {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !anyPodNamed(pods.Items, component) {
			t.Errorf("no %s pod in kube-system", component)
		}
	}
}

func TestDNSResolvesService(t *testing.T) {
	cs := Client(t)
	ns := namespace(t, cs)
	image := busybox(t, cs)
	svc := createService(t, cs, ns, "resolve-me", 80, 8080)

	// The fully qualified name, then the short name through the pod's search
	// path, both answered by CoreDNS at the cluster DNS address. busybox's
	// nslookup fails a search-path lookup when any candidate is NXDOMAIN, so
	// the short name is judged by its answer, not its exit code.
	fqdn := fmt.Sprintf("resolve-me.%s.svc.cluster.local", ns)
	logs := runToCompletion(t, cs, ns, "dig", image, fmt.Sprintf("nslookup %s && echo ---- && (nslookup resolve-me || true)", fqdn), nil)
	full, short, ok := strings.Cut(logs, "----")
	if !ok {
		t.Fatalf("unexpected output:\n%s", logs)
	}
	for name, out := range map[string]string{fqdn: full, "resolve-me": short} {
		if !strings.Contains(out, "Name:\t"+fqdn) || !strings.Contains(out, "Address: "+svc.Spec.ClusterIP) {
			t.Errorf("nslookup %s did not answer %s with the Service's ClusterIP %s:\n%s", name, fqdn, svc.Spec.ClusterIP, out)
		}
	}
}

func TestServiceThroughKubeProxy(t *testing.T) {
	cs := Client(t)
	ctx := t.Context()
	ns := namespace(t, cs)
	image := busybox(t, cs)
	token := rand.String(16)

	server := restrictedPod("web", image, fmt.Sprintf("mkdir -p /tmp/www && echo %s > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www", token))
	server.Labels = map[string]string{"app": "web"}
	server.Spec.RestartPolicy = corev1.RestartPolicyAlways
	server.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	server.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := createService(t, cs, ns, "web", 80, 8080)
	waitFor(t, "the web Service to have a ready endpoint", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && podReady(p), err
	})

	// By ClusterIP and by name: both are translated by kube-proxy's rules to
	// the server pod's address. (busybox 1.35's wget -T crashes: timeout
	// bounds it instead.)
	script := fmt.Sprintf("timeout 10 wget -q -O - http://%s/ && timeout 10 wget -q -O - http://web.%s.svc.cluster.local/", svc.Spec.ClusterIP, ns)
	logs := runToCompletion(t, cs, ns, "client", image, script, nil)
	if got := strings.Count(logs, token); got != 2 {
		t.Errorf("client did not get the server's page twice (token %s):\n%s", token, logs)
	}
}

func TestPersistentVolumeClaimBindsAndIsWritable(t *testing.T) {
	cs := Client(t)
	ctx := t.Context()
	ns := namespace(t, cs)
	image := busybox(t, cs)

	// No storageClassName: the cluster's default StorageClass provides it.
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := rand.String(16)
	mount := func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	runToCompletion(t, cs, ns, "writer", image, fmt.Sprintf("echo %s > /data/token", token), mount)
	// A second pod reads what the first one wrote: the data is on the volume.
	logs := runToCompletion(t, cs, ns, "reader", image, "cat /data/token", mount)
	if !strings.Contains(logs, token) {
		t.Errorf("reader did not read what writer wrote (%s):\n%s", token, logs)
	}

	got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.ClaimBound {
		t.Errorf("PVC phase = %s, want Bound", got.Status.Phase)
	}
	if got.Spec.StorageClassName == nil || *got.Spec.StorageClassName != "standard" {
		t.Errorf("PVC storageClassName = %v, want the default class standard", got.Spec.StorageClassName)
	}
}

// TestNetworkPolicyDeniesIngress proves that an ingress NetworkPolicy is
// enforced: a pod the policy admits reaches the guarded server, a pod of the
// same namespace that it does not admit and a pod of another namespace
// (labelled like the admitted one: a podSelector without namespaceSelector
// means this namespace only) are refused, while both still reach an
// unguarded server. It runs only where NetworkPolicy is enforced.
func TestNetworkPolicyDeniesIngress(t *testing.T) {
	cs := Client(t)
	RequireNetworkPolicyEnforcement(t, cs)
	ns := namespace(t, cs)
	other := namespace(t, cs)
	image := busybox(t, cs)
	guarded, open := policyServers(t, cs, ns, image)
	createNetworkPolicy(t, cs, ns, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded-ingress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"friend": "yes"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(serverPort))}},
			}},
		},
	})

	friend := map[string]string{"friend": "yes"}
	expectConnections(t, cs, ns, "friend", image, friend, []string{guarded, open}, nil)
	expectConnections(t, cs, ns, "intruder", image, nil, []string{open}, []string{guarded})
	expectConnections(t, cs, other, "outsider", image, friend, []string{open}, []string{guarded})
}

// TestNetworkPolicyDeniesEgress proves that an egress NetworkPolicy is
// enforced: the confined pod reaches the one server its policy lists and not
// the other, which an unconfined pod of the same namespace reaches.
func TestNetworkPolicyDeniesEgress(t *testing.T) {
	cs := Client(t)
	RequireNetworkPolicyEnforcement(t, cs)
	ns := namespace(t, cs)
	image := busybox(t, cs)
	guarded, open := policyServers(t, cs, ns, image)
	createNetworkPolicy(t, cs, ns, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "confined-egress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"confined": "yes"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(serverPort))}},
			}},
		},
	})

	expectConnections(t, cs, ns, "free", image, nil, []string{guarded, open}, nil)
	expectConnections(t, cs, ns, "confined", image, map[string]string{"confined": "yes"}, []string{guarded}, []string{open})
}

// serverPort is where the NetworkPolicy tests' servers listen.
const serverPort = 8080

// policyServers starts two web servers, labelled app=guarded and app=open,
// and returns their pod IPs once both serve.
func policyServers(t *testing.T, cs kubernetes.Interface, ns, image string) (guarded, open string) {
	t.Helper()
	ips := map[string]string{}
	for _, name := range []string{"guarded", "open"} {
		server := restrictedPod(name, image, fmt.Sprintf("mkdir -p /tmp/www && echo %s > /tmp/www/index.html && exec httpd -f -p %d -h /tmp/www", name, serverPort))
		server.Labels = map[string]string{"app": name}
		server.Spec.RestartPolicy = corev1.RestartPolicyAlways
		server.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: serverPort}}
		// kubelet probes from the node, which NetworkPolicy never blocks.
		server.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(serverPort)}},
			PeriodSeconds: 1,
		}
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), server, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"guarded", "open"} {
		waitFor(t, "server "+name+" to be ready", func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ips[name] = p.Status.PodIP
			return podReady(p) && p.Status.PodIP != "", nil
		})
	}
	return ips["guarded"], ips["open"]
}

func createNetworkPolicy(t *testing.T, cs kubernetes.Interface, ns string, policy *networkingv1.NetworkPolicy) {
	t.Helper()
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// expectConnections runs a client pod with the given labels that must reach
// the servers at the addresses of reach and be refused by those of deny
// (ConnectionScript, JudgeConnections).
func expectConnections(t *testing.T, cs kubernetes.Interface, ns, name, image string, labels map[string]string, reach, deny []string) {
	t.Helper()
	urls := func(ips []string) []string {
		var out []string
		for _, ip := range ips {
			out = append(out, fmt.Sprintf("http://%s:%d/", ip, serverPort))
		}
		return out
	}
	logs := runToCompletion(t, cs, ns, name, image, ConnectionScript(urls(reach), urls(deny)), func(p *corev1.Pod) { p.Labels = labels })
	if err := JudgeConnections(logs, urls(reach), urls(deny)); err != nil {
		t.Errorf("%s/%s (labels %v), expected to reach %v and be refused by %v: %v\n%s", ns, name, labels, reach, deny, err, logs)
		return
	}
	t.Logf("%s/%s (labels %v): reached %v, refused by %v (%d rounds)", ns, name, labels, reach, deny, strings.Count(logs, "round "))
}

// TestNoImageWasPulled runs last: every pod the cluster and the tests above
// started used a preloaded image.
func TestNoImageWasPulled(t *testing.T) {
	cs := Client(t)
	ctx := t.Context()
	events, err := cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=Pulling"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		t.Errorf("%s/%s: %s %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	// The check above can only fail if kubelet's image events are there at
	// all: make sure they are.
	pulled, err := cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=Pulled"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pulled.Items) == 0 {
		t.Error("no Pulled events at all: kubelet's image events are missing, so the absence of Pulling events proves nothing")
	}
	for _, e := range pulled.Items {
		if !strings.Contains(e.Message, "already present on machine") {
			t.Errorf("%s/%s: %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
		}
	}
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "smoke-",
		Labels:       map[string]string{"app.kubernetes.io/part-of": "ml-platform-e2e"},
	}}
	created, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			DumpNamespace(t, cs, created.Name)
		}
		err := cs.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", created.Name, err)
		}
	})
	return created.Name
}

func busybox(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	image, err := BusyboxImage(t.Context(), cs)
	if err != nil {
		t.Fatal(err)
	}
	return image
}

func createService(t *testing.T, cs kubernetes.Interface, ns, name string, port, targetPort int32) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(targetPort)}},
		},
	}
	created, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// restrictedPod is a busybox pod running script as nobody under the
// restricted Pod Security Standard, as the platform's workloads will.
func restrictedPod(name, image, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65534),
				RunAsGroup:     ptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// runToCompletion runs script in a pod, waits for it to succeed and returns
// its logs; a failed pod fails the test with them.
func runToCompletion(t *testing.T, cs kubernetes.Interface, ns, name, image, script string, mutate func(*corev1.Pod)) string {
	t.Helper()
	pod := restrictedPod(name, image, script)
	if mutate != nil {
		mutate(pod)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	waitFor(t, "pod "+name+" to finish", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	logs := PodLogs(cs, ns, name)
	if phase != corev1.PodSucceeded {
		t.Fatalf("pod %s %s; logs:\n%s", name, phase, logs)
	}
	return logs
}

func waitFor(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), pollInterval, podTimeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func anyPodNamed(pods []corev1.Pod, prefix string) bool {
	for _, p := range pods {
		if strings.HasPrefix(p.Name, prefix+"-") {
			return true
		}
	}
	return false
}
