package kueuecompat

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	notebookstesting "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/controller/notebook"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	sharedkueue "github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/kueue"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
	t0     = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

// TestMain starts one control plane with the real StatefulSet controller
// (it creates a Notebook's pod, which Kueue gates until admission; no
// scheduler or kubelet runs, so the tests act out the pod's readiness)
// and an audit log of every write, from which the tests count what the
// operator, Kueue and the StatefulSet controller each wrote.
func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = notebooksv1alpha1.AddToScheme(scheme)
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "charts", "notebook-operator", "files", "crds")},
		ControllerManager: true,
		Controllers:       []string{"statefulset-controller"},
		AuditWrites:       true,
		// The front proxy's certificates let the aggregator forward the
		// callers of Kueue's visibility API to Kueue.
		FrontProxy: true,
	}, &env)
}

// Identities in the audit log.
const (
	operatorUser = "notebook-operator"
	kueueUser    = "kueue"
)

var (
	gcOnce sync.Once
	gcErr  error
)

// frameworks are the integrations the tests switch on: statefulset for
// Notebooks (it switches on pod too), batch/job for the Job that waits
// for a culled notebook's GPU.
var frameworks = []string{"statefulset", "batch/job"}

// stack is one test's view of the running system.
type stack struct {
	c      client.Client
	ns     string
	kueue  *kueue.Kueue
	op     *operatortest.Operator
	r      *notebook.Reconciler
	clock  *clocktesting.FakeClock
	prober *prober
}

// startStack starts a fresh Kueue (its CRDs first, so the operator
// watches Workloads) and the operator, and creates the test's namespace.
// It skips the test only when the Kueue binary cannot be built.
func startStack(t *testing.T) *stack {
	t.Helper()
	return startStackWith(t, stackOptions{})
}

// stackOptions vary what startStackWith starts.
type stackOptions struct {
	// visibility starts Kueue's visibility server (the pendingworkloads
	// API) and registers its APIServices.
	visibility bool
	// positionRefresh is how often queued Notebooks read their position;
	// zero keeps the operator's default.
	positionRefresh time.Duration
}

func startStackWith(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	s := &stack{c: env.AdminClient(t, scheme), clock: clocktesting.NewFakeClock(t0), prober: &prober{obs: map[string]jupyter.Observation{}}}
	s.kueue = kueue.ForTest(t, env, kueueUser, kueue.Options{Frameworks: frameworks, Visibility: opts.visibility})
	// Kueue deletes nothing when a StatefulSet scales to zero: the
	// garbage collector deletes the Workload once its owners (the pods)
	// are gone. The collector learns of Kueue's CRDs, installed after it
	// started, at once only when it starts again.
	gcOnce.Do(func() { gcErr = env.RestartControllerManager() })
	if gcErr != nil {
		t.Fatal(gcErr)
	}
	opCfg, err := env.AddUser(operatorUser, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	s.op, s.r = operatortest.StartController(t, operatortest.Options{
		RESTConfig: opCfg,
		Manager:    manager.Options{Name: render.OperatorName, Scheme: scheme, OwnedObjects: notebook.OwnedObjects()},
	}, operatortest.Controller[*notebook.Reconciler]{
		Build: func(mgr ctrl.Manager, _ manager.Config) (*notebook.Reconciler, error) {
			cfg := config.Default()
			cfg.NetworkPolicy.OperatorNamespace = "mlp-system"
			r, err := notebook.NewReconciler(mgr, cfg, accelerator.Default())
			if err != nil {
				return nil, err
			}
			r.Prober, r.Clock, r.Endpoint = s.prober, s.clock, endpoint
			if opts.positionRefresh > 0 {
				r.QueuePositionRefresh = opts.positionRefresh
			}
			return r, nil
		},
	})
	if !s.r.WatchesWorkloads {
		t.Fatal("the operator does not watch Kueue's Workloads")
	}
	s.ns = testenv.CreateNamespace(t, s.c, "nbkueue")
	t.Cleanup(func() {
		_ = s.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})
	})
	return s
}

// prober answers for every Notebook that Jupyter runs, idle since t0.
type prober struct {
	mu  sync.Mutex
	obs map[string]jupyter.Observation
}

func endpoint(nb *notebooksv1alpha1.Notebook) string { return "fake://" + nb.Namespace + "/" + nb.Name }

func (p *prober) Probe(_ context.Context, t jupyter.Target) jupyter.Observation {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o, ok := p.obs[t.BaseURL]; ok {
		return o
	}
	return jupyter.Observation{LastActivity: t0, TerminalsAvailable: true}
}

var _ notebook.Prober = (*prober)(nil)

// gpuResource is the GPU of the default accelerator catalog.
const gpuResource = "nvidia.com/gpu"

// createQueues creates a ResourceFlavor, a ClusterQueue with cpu CPUs
// and gpu GPUs that serves only the test's namespace, and a LocalQueue
// named queue pointing at it, and waits until Kueue made it Active.
func (s *stack) createQueues(t *testing.T, queue, cpu, gpu string) {
	t.Helper()
	name := s.ns + "-" + queue
	objs := []*unstructured.Unstructured{
		kueue.Object("ResourceFlavor", "", name, map[string]any{"spec": map[string]any{}}),
		kueue.Object("ClusterQueue", "", name, map[string]any{"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: s.ns}},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "memory", gpuResource},
				"flavors": []any{map[string]any{"name": name, "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": cpu},
					map[string]any{"name": "memory", "nominalQuota": "64Gi"},
					map[string]any{"name": gpuResource, "nominalQuota": gpu},
				}}},
			}},
		}}),
		kueue.Object("LocalQueue", s.ns, queue, map[string]any{"spec": map[string]any{"clusterQueue": name}}),
	}
	kueue.CreateAll(t, s.c, objs...)
	kueue.WaitActive(t, s.c, objs[1])
}

// notebookIn is a Notebook in queue whose Jupyter container requests cpu
// CPUs and gpus GPUs.
func (s *stack) notebookIn(name, queue, cpu string, gpus int32) *notebooksv1alpha1.Notebook {
	nb := notebookstesting.MakeNotebook(s.ns, name).Queue(queue).Obj()
	nb.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if gpus > 0 {
		nb.Spec.Resources.Accelerators = &commonv1alpha1.Accelerators{Count: gpus}
	}
	return nb
}

func (s *stack) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := s.c.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
}

// waitNotebook polls until check accepts the Notebook as last reconciled.
func (s *stack) waitNotebook(t *testing.T, nb *notebooksv1alpha1.Notebook, what string, check func(*notebooksv1alpha1.Notebook) bool) *notebooksv1alpha1.Notebook {
	t.Helper()
	got := &notebooksv1alpha1.Notebook{}
	testenv.Eventually(t, nb.Name+": "+what, func(ctx context.Context) (bool, error) {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(nb), got); err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration == got.Generation && check(got), nil
	})
	return got
}

// updateNotebook changes a Notebook as its user would.
func (s *stack) updateNotebook(t *testing.T, nb *notebooksv1alpha1.Notebook, mutate func(*notebooksv1alpha1.Notebook)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &notebooksv1alpha1.Notebook{}
		if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(nb), got); err != nil {
			return err
		}
		mutate(got)
		return s.c.Update(t.Context(), got)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pod returns the Notebook's pod, nil while there is none.
func (s *stack) pod(ctx context.Context, nb *notebooksv1alpha1.Notebook) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: nb.Name + "-0"}, pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pod, err
}

func gated(pod *corev1.Pod) bool { return len(pod.Spec.SchedulingGates) > 0 }

// actOutAdmittedPod waits until Kueue ungated the Notebook's pod and plays
// the scheduler and the kubelet: the pod is bound to a node, runs and is
// ready. The real StatefulSet controller then counts it ready. Bound to a
// node, the pod is deleted gracefully, as in a cluster: it stays
// terminating until actOutTermination plays the kubelet's part.
func (s *stack) actOutAdmittedPod(t *testing.T, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	var pod *corev1.Pod
	testenv.Eventually(t, nb.Name+"'s pod is ungated", func(ctx context.Context) (bool, error) {
		var err error
		pod, err = s.pod(ctx, nb)
		return pod != nil && !gated(pod) && pod.DeletionTimestamp.IsZero(), err
	})
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	}
	if err := s.c.SubResource("binding").Create(t.Context(), pod, binding); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	if err := s.c.Status().Update(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
}

// actOutTermination plays the kubelet stopping the Notebook's terminating
// pod: it removes the pod once Kueue has reacted to the scale-down (the
// StatefulSet no longer owns its Workload), which a real kubelet's grace
// period leaves Kueue time for. Kueue v0.17 then leaves the Workload owned
// by the pods alone, and the garbage collector deletes it with them; a pod
// gone before that can leave the Workload without any owner, holding its
// quota (a race in Kueue that instant deletion in a test would provoke).
func (s *stack) actOutTermination(t *testing.T, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	testenv.Eventually(t, nb.Name+"'s pod is terminating", func(ctx context.Context) (bool, error) {
		pod, err := s.pod(ctx, nb)
		return pod != nil && !pod.DeletionTimestamp.IsZero(), err
	})
	testenv.Eventually(t, "Kueue released "+nb.Name+"'s Workload from its StatefulSet", func(ctx context.Context) (bool, error) {
		wl, err := s.workloadOf(ctx, nb)
		if err != nil || wl == nil {
			return wl == nil, err
		}
		for _, ref := range wl.GetOwnerReferences() {
			if ref.Kind == "StatefulSet" {
				return false, nil
			}
		}
		return true, nil
	})
	pod, err := s.pod(t.Context(), nb)
	if err != nil || pod == nil {
		t.Fatalf("the pod of %s: %v", nb.Name, err)
	}
	if err := s.c.Delete(t.Context(), pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// workloadOf returns the unfinished Workload Kueue keeps for the
// Notebook's StatefulSet, nil while none.
func (s *stack) workloadOf(ctx context.Context, nb *notebooksv1alpha1.Notebook) (*unstructured.Unstructured, error) {
	sts := &appsv1.StatefulSet{}
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(nb), sts); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	wls, err := sharedkueue.WorkloadsOf(ctx, s.c, s.ns, sts.UID)
	for i := range wls {
		if !sharedkueue.Observe(&wls[i]).Finished {
			return &wls[i], err
		}
	}
	return nil, err
}

// writesOn counts the successful writes on the main resource of the
// objects of resource named name (a name prefix for pods) in the test's
// namespace, by user, from the API server's audit log.
func (s *stack) writesOn(t *testing.T, resource, name string) map[string]int {
	t.Helper()
	writes, err := env.AuditedWrites()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, w := range writes {
		if w.Resource == resource && w.Namespace == s.ns && w.Name == name && w.Succeeded() {
			out[w.User]++
		}
	}
	return out
}

// refusedWritesOn lists the refused writes on the object, conflicts
// included: a fight shows as a stream of them. One kind of conflict is
// not a refusal: the operator's apply that creates a child only when its
// name is free (shared/apply), sent when its cache does not show the child
// yet. The operator's other writes of a child are applies that carry no
// resourceVersion, which never conflict.
func (s *stack) refusedWritesOn(t *testing.T, resource, name string) []testenv.AuditedWrite {
	t.Helper()
	writes, err := env.AuditedWrites()
	if err != nil {
		t.Fatal(err)
	}
	var out []testenv.AuditedWrite
	for _, w := range writes {
		createOnly := w.User == operatorUser && w.Verb == "patch" && w.Code == http.StatusConflict
		if w.Resource == resource && w.Namespace == s.ns && w.Name == name && !w.Succeeded() && !createOnly {
			out = append(out, w)
		}
	}
	return out
}
