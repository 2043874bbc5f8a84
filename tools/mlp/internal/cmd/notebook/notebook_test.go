package notebook

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

func getNotebook(t *testing.T, ns, name string) *notebooksv1alpha1.Notebook {
	t.Helper()
	var nb notebooksv1alpha1.Notebook
	if err := clitest.AdminClient(t).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &nb); err != nil {
		t.Fatal(err)
	}
	return &nb
}

// TestNotebookLifecycle creates, lists, stops, starts and deletes a
// Notebook in our API group, while a Kubeflow Notebook of the same name
// exists and is never touched.
func TestNotebookLifecycle(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	ctx := context.Background()
	kf := &unstructured.Unstructured{}
	kf.SetGroupVersionKind(schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "Notebook"})
	kf.SetNamespace(ns)
	kf.SetName("alice")
	if err := c.Create(ctx, kf); err != nil {
		t.Fatal(err)
	}

	r := clitest.Run(t, ns, "notebook", "create", "alice", "--memory", "4Gi", "--workspace", "5Gi")
	if r.Code != 0 || !strings.Contains(r.Out, "notebook.notebooks.mlplatform.dev/alice created") {
		t.Fatalf("create: exit %d, out %q, stderr %q", r.Code, r.Out, r.Err)
	}
	nb := getNotebook(t, ns, "alice")
	if nb.Spec.Workspace.Size.String() != "5Gi" || nb.Spec.Resources.Limits.Memory().String() != "4Gi" {
		t.Errorf("created spec %+v does not carry the flags", nb.Spec)
	}
	nb.Status.Phase, nb.Status.Image = notebooksv1alpha1.PhaseRunning, "jupyter:1"
	if err := c.Status().Update(ctx, nb); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"notebook-list-table": {"notebook", "list"},
		"notebook-get-yaml":   {"notebook", "get", "alice", "-o", "yaml"},
	} {
		r := clitest.Run(t, ns, args...)
		if r.Code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, r.Code, r.Err)
		}
		out := clitest.Normalize(r.Out, ns)
		if name == "notebook-list-table" {
			// The API server computes the table's ages from its clock.
			out = clitest.NormalizeTable(out, "AGE")
		}
		clitest.Golden(t, name, out)
	}

	if r := clitest.Run(t, ns, "notebook", "stop", "alice"); r.Code != 0 || !getNotebook(t, ns, "alice").Spec.Suspend {
		t.Fatalf("stop: exit %d, stderr %q", r.Code, r.Err)
	}
	r = clitest.Run(t, ns, "notebook", "start", "alice")
	nb = getNotebook(t, ns, "alice")
	if r.Code != 0 || nb.Spec.Suspend || nb.Annotations[notebooksv1alpha1.AnnotationRestart] == "" {
		t.Fatalf("start: exit %d, stderr %q, suspended %v, annotations %v", r.Code, r.Err, nb.Spec.Suspend, nb.Annotations)
	}
	first := nb.Annotations[notebooksv1alpha1.AnnotationRestart]
	time.Sleep(time.Millisecond) // The restart request is a timestamp; a second start must carry a new one.
	clitest.Run(t, ns, "notebook", "start", "alice")
	if again := getNotebook(t, ns, "alice").Annotations[notebooksv1alpha1.AnnotationRestart]; again == first {
		t.Errorf("a second start reused the restart value %q: the operator would ignore it", again)
	}

	if r := clitest.Run(t, ns, "notebook", "delete", "alice"); r.Code != 0 {
		t.Fatalf("delete: exit %d, stderr %q", r.Code, r.Err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kf), kf); err != nil {
		t.Errorf("the Kubeflow Notebook of the same name is gone: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &notebooksv1alpha1.Notebook{}); !apierrors.IsNotFound(err) {
		t.Errorf("our Notebook after delete: %v", err)
	}
}

// notebookBackend creates what the Notebook operator would: the Service,
// the token Secret and a ready pod behind the Service.
func notebookBackend(t *testing.T, c client.Client, ns, name, pod string) {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{}
	svc.Namespace, svc.Name = ns, name
	svc.Spec.Selector = map[string]string{"notebooks.mlplatform.dev/name": name}
	svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80}}
	if err := c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	secret := &corev1.Secret{Data: map[string][]byte{"token": []byte("s3cr3t+/=")}}
	secret.Namespace, secret.Name = ns, name+"-token"
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := &corev1.Pod{}
	p.Namespace, p.Name = ns, pod
	p.Labels = map[string]string{"notebooks.mlplatform.dev/name": name}
	p.Spec.Containers = []corev1.Container{{Name: "notebook", Image: "jupyter:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8888}}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// TestNotebookOpenForwardsAndReconnects prints a URL with the token from
// the Secret, forwards to the ready pod behind the Service, and follows the
// Notebook to its new pod when the first goes away, on the same local port.
// The forward itself needs a kubelet, which the test control plane lacks:
// the test's forwarder records where it was sent.
func TestNotebookOpenForwardsAndReconnects(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	nb := &notebooksv1alpha1.Notebook{}
	nb.Namespace, nb.Name = ns, "bob"
	if err := c.Create(ctx, nb); err != nil {
		t.Fatal(err)
	}
	notebookBackend(t, c, ns, "bob", "bob-0")

	var mu sync.Mutex
	var calls []string
	forward := func(fctx context.Context, _ *kube.Session, pod *corev1.Pod, local, remote int, ready chan<- int) error {
		mu.Lock()
		calls = append(calls, pod.Name+" "+strconv.Itoa(local)+":"+strconv.Itoa(remote))
		n := len(calls)
		mu.Unlock()
		if local == 0 {
			local = 43210
		}
		ready <- local
		if n == 1 {
			// The pod restarts: the operator's StatefulSet replaces it.
			if err := c.Delete(fctx, pod); err != nil {
				return err
			}
			notebookBackend(t, c, ns, "bob", "bob-0-new")
			return errors.New("lost connection to pod")
		}
		cancel() // Ctrl-C once reconnected.
		<-fctx.Done()
		return nil
	}
	r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) { o.Forward = forward }, "notebook", "open", "bob")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	wantURL := "http://127.0.0.1:43210/notebook/" + ns + "/bob/?token=" + url.QueryEscape("s3cr3t+/=")
	if r.Out != "Notebook bob is at "+wantURL+"\n" {
		t.Errorf("stdout %q, want the URL %s", r.Out, wantURL)
	}
	if strings.Join(calls, ",") != "bob-0 0:8888,bob-0-new 43210:8888" {
		t.Errorf("forwards %q: want the first pod on a free port, then the new pod on the same port", calls)
	}
	if !strings.Contains(r.Err, "lost the connection to pod bob-0 (lost connection to pod); reconnecting") ||
		!strings.Contains(r.Err, "reconnected to pod bob-0-new") {
		t.Errorf("stderr does not tell about the reconnect: %q", r.Err)
	}
}

// TestNotebookOpenStoppedSaysHowToStart refuses to wait on a culled
// Notebook and names the command that starts it.
func TestNotebookOpenStoppedSaysHowToStart(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	nb := &notebooksv1alpha1.Notebook{}
	nb.Namespace, nb.Name = ns, "idle"
	if err := c.Create(context.Background(), nb); err != nil {
		t.Fatal(err)
	}
	nb.Status.Phase = notebooksv1alpha1.PhaseCulled
	if err := c.Status().Update(context.Background(), nb); err != nil {
		t.Fatal(err)
	}
	r := clitest.Run(t, ns, "notebook", "open", "idle")
	if r.Code != util.ExitFailed || !strings.Contains(r.Err, "the Notebook \"idle\" is Culled: start it with `mlp notebook start idle`") {
		t.Errorf("exit %d, stderr %q", r.Code, r.Err)
	}
}

// TestNotebookOpenWithoutSecretRights names the Secret read RBAC denied.
func TestNotebookOpenWithoutSecretRights(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	nb := &notebooksv1alpha1.Notebook{}
	nb.Namespace, nb.Name = ns, "nb"
	if err := c.Create(context.Background(), nb); err != nil {
		t.Fatal(err)
	}
	cfg := clitest.UserWithRules(t, ns, "dave", clitest.Rule("notebooks.mlplatform.dev", "notebooks", "get", "list"))
	r := clitest.CLI(context.Background(), t, cfg, ns, nil, "notebook", "open", "nb")
	if r.Code != util.ExitFailed || !strings.Contains(r.Err, `permission denied: you may not get secrets in namespace "`+ns+`"`) ||
		!strings.Contains(r.Err, `cannot get resource "secrets"`) {
		t.Errorf("exit %d, stderr %q", r.Code, r.Err)
	}
}

// TestNotebookOpenForbiddenForwardStops: a port-forward RBAC denies is
// reported once, not retried forever.
func TestNotebookOpenForbiddenForwardStops(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	nb := &notebooksv1alpha1.Notebook{}
	nb.Namespace, nb.Name = ns, "nb"
	if err := c.Create(context.Background(), nb); err != nil {
		t.Fatal(err)
	}
	notebookBackend(t, c, ns, "nb", "nb-0")
	calls := 0
	forward := func(_ context.Context, _ *kube.Session, pod *corev1.Pod, _, _ int, _ chan<- int) error {
		calls++
		denied := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/portforward"}, pod.Name, errors.New("no"))
		return kube.ExplainCore(denied, "pods/portforward", "create", pod.Name, ns)
	}
	// The deadline ends a retry loop, should the denial ever be retried.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) { o.Forward = forward }, "notebook", "open", "nb")
	if r.Code != util.ExitFailed || calls != 1 || !strings.Contains(r.Err, "permission denied: you may not create pods/portforward") {
		t.Errorf("exit %d after %d forwards, stderr %q", r.Code, calls, r.Err)
	}
}
