package kueue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/notebooks"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// Bounds, not expectations: Kueue, the operator, the scheduler and the
// kubelet share two loaded cores.
const (
	admitTimeout = 5 * time.Minute
	// holdFor is how long a job beyond quota is watched to stay Queued.
	holdFor = 20 * time.Second
)

// Each job asks for jobCPU; the ClusterQueue has quotaCPU, so one job fits
// and a second does not. Both are small enough for the kind node, whose
// system pods request most of its two CPUs.
var (
	jobCPU      = resource.MustParse("150m")
	quotaCPU    = resource.MustParse("200m")
	jobMemory   = resource.MustParse("32Mi")
	quotaMemory = resource.MustParse("256Mi")
)

var kueueGroup = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

// TestQuotaQueueingAndPriorityPreemption: within quota a TrainingJob is
// admitted and runs; a second one beyond quota stays Queued with Kueue's
// reason in its condition; a TrainingJob of a higher WorkloadPriorityClass
// preempts the running one, which goes back to Queued (Evicted: neither a
// failure nor a restart) and is admitted again, on the same run, once the
// preemptor is gone.
func TestQuotaQueueingAndPriorityPreemption(t *testing.T) {
	e := steps.Connect(t)
	requireKueue(t, e)
	ns := e.Namespace(t, "e2e-kueue")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	queue := createQueues(t, e, ns, quotaCPU, quotaMemory)
	low, high := createPriorityClass(t, e, ns+"-low", 10), createPriorityClass(t, e, ns+"-high", 1000)

	first := sleeper(ns, "first", image, queue, low)
	create(t, e, first)
	waitAdmitted(t, e, first)
	e.WaitCondition(t, first, "Running", metav1.ConditionTrue, "Failed", admitTimeout)
	pod := waitPodRunning(t, e, first)
	t.Logf("%s admitted within quota and running (pod %s)", first.Name, pod)

	second := sleeper(ns, "second", image, queue, low)
	create(t, e, second)
	c := waitQueued(t, e, second, "Waiting")
	// Kueue's words, e.g. "couldn't assign flavors to pod set main:
	// insufficient unused quota for cpu in flavor F, 100m more needed".
	if !strings.Contains(c.Message, "Kueue: ") || !strings.Contains(c.Message, "insufficient unused quota for cpu") {
		t.Errorf("%s is Queued without Kueue's reason: %s", second.Name, c.Message)
	}
	holdsQueued(t, e, second)
	t.Logf("%s beyond quota stays Queued: %s", second.Name, c.Message)
	// The second job leaves the queue, so that the preempted one is the
	// only one waiting for the quota the preemptor frees.
	if err := e.C.Delete(t.Context(), second); err != nil {
		t.Fatal(err)
	}

	urgent := sleeper(ns, "urgent", image, queue, high)
	create(t, e, urgent)
	c = waitQueued(t, e, first, "Evicted")
	if !strings.Contains(c.Message, "Preempted") {
		t.Errorf("%s was evicted, but Kueue's reason is not a preemption: %s", first.Name, c.Message)
	}
	t.Logf("%s preempted by %s: %s", first.Name, urgent.Name, c.Message)
	waitAdmitted(t, e, urgent)
	e.WaitCondition(t, urgent, "Running", metav1.ConditionTrue, "Failed", admitTimeout)

	if err := e.C.Delete(t.Context(), urgent); err != nil {
		t.Fatal(err)
	}
	waitAdmitted(t, e, first)
	e.WaitCondition(t, first, "Running", metav1.ConditionTrue, "Failed", admitTimeout)
	if again := waitPodRunning(t, e, first); again == pod {
		t.Errorf("%s was preempted, yet its pod %s was never replaced", first.Name, pod)
	}
	if first.Status.Run != 1 || first.Status.RestartCount != 0 {
		t.Errorf("%s re-admitted on run %d with %d restarts; a preemption is neither a new run nor a restart", first.Name, first.Status.Run, first.Status.RestartCount)
	}
	t.Logf("%s admitted again and running, run %d, %d restarts", first.Name, first.Status.Run, first.Status.RestartCount)
}

// notebookMemoryQuota admits one Notebook of notebooks.NewNotebook (256Mi
// of memory requested) and not two.
var notebookMemoryQuota = resource.MustParse("400Mi")

// TestNotebookWaitsForQuotaThroughStatefulSetIntegration: Notebooks with
// spec.queueName are admitted by Kueue's statefulset integration (the
// operator labels the StatefulSet and its pod template with the queue).
// Within quota a Notebook becomes Ready; a second one beyond quota gets no
// running server (its pod held by Kueue's scheduling gate, never Ready);
// deleting the first frees the quota and the second becomes Ready.
func TestNotebookWaitsForQuotaThroughStatefulSetIntegration(t *testing.T) {
	e := steps.Connect(t)
	requireKueue(t, e)
	ns := e.Namespace(t, "e2e-kueue-nb")
	queue := createQueues(t, e, ns, resource.MustParse("1"), notebookMemoryQuota)

	first := notebooks.NewNotebook(t, ns, "first", false)
	first.Spec.QueueName = queue
	notebooks.CreateReady(t, e, first)
	t.Logf("Notebook %s admitted within quota and Ready", first.Name)

	second := notebooks.NewNotebook(t, ns, "second", false)
	second.Spec.QueueName = queue
	if err := e.C.Create(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	gated := heldByKueue(t, e, second)
	t.Logf("Notebook %s beyond quota: not Ready, pod %s held by Kueue's scheduling gate", second.Name, gated)

	if err := e.C.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	e.WaitCondition(t, second, "Ready", metav1.ConditionTrue, "Stalled", admitTimeout)
	t.Logf("Notebook %s Ready once %s was deleted", second.Name, first.Name)
}

// heldByKueue checks for holdFor that nb is not Ready and that its pod
// exists with Kueue's admission scheduling gate, and returns the pod's name.
func heldByKueue(t *testing.T, e *steps.Env, nb *notebooksv1alpha1.Notebook) string {
	t.Helper()
	var gated string
	steps.Until(t, fmt.Sprintf("the pod of Notebook %s to be gated by Kueue", nb.Name), admitTimeout, func(ctx context.Context) (bool, error) {
		gated = gatedPod(ctx, t, e, nb)
		return gated != "", nil
	})
	deadline := time.Now().Add(holdFor)
	for time.Now().Before(deadline) {
		if err := e.C.Get(t.Context(), client.ObjectKeyFromObject(nb), nb); err != nil {
			t.Fatal(err)
		}
		if meta.IsStatusConditionTrue(nb.Status.Conditions, "Ready") {
			t.Fatalf("Notebook %s beyond quota is Ready: %+v", nb.Name, nb.Status.Conditions)
		}
		if gatedPod(t.Context(), t, e, nb) == "" {
			t.Fatalf("Notebook %s beyond quota: its pod is no longer held by Kueue", nb.Name)
		}
		time.Sleep(steps.Poll)
	}
	return gated
}

// gatedPod is the name of a pod of nb's StatefulSet (named after nb) that
// carries Kueue's admission scheduling gate, or "".
func gatedPod(ctx context.Context, t *testing.T, e *steps.Env, nb *notebooksv1alpha1.Notebook) string {
	t.Helper()
	var pods corev1.PodList
	if err := e.C.List(ctx, &pods, client.InNamespace(nb.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, nb.Name+"-") {
			continue
		}
		for _, g := range p.Spec.SchedulingGates {
			if g.Name == "kueue.x-k8s.io/admission" {
				return p.Name
			}
		}
	}
	return ""
}

// requireKueue skips the suite on a cluster without Kueue's CRDs.
func requireKueue(t *testing.T, e *steps.Env) {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kueueGroup.WithKind("ClusterQueueList"))
	err := e.C.List(t.Context(), list)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		t.Skip("Kueue is not installed (make e2e installs it when E2E_SUITES names kueue)")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// createQueues creates a ResourceFlavor and a ClusterQueue of their own
// (cluster-scoped, deleted after the test) with the cpu and memory quota,
// preempting lower priorities within the queue, and a LocalQueue in ns
// that feeds it. It returns the LocalQueue's name.
func createQueues(t *testing.T, e *steps.Env, ns string, cpu, memory resource.Quantity) string {
	t.Helper()
	return createQueuesWith(t, e, ns, corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory})
}

// createQueuesWith is createQueues with a quota of each resource given.
func createQueuesWith(t *testing.T, e *steps.Env, ns string, quota corev1.ResourceList) string {
	t.Helper()
	var covered, resources []any
	for _, name := range slices.Sorted(maps.Keys(quota)) {
		q := quota[name]
		covered = append(covered, string(name))
		resources = append(resources, map[string]any{"name": string(name), "nominalQuota": q.String()})
	}
	flavor := object("ResourceFlavor", "", ns, map[string]any{})
	cq := object("ClusterQueue", "", ns, map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: ns}},
		"preemption":        map[string]any{"withinClusterQueue": "LowerPriority"},
		"resourceGroups": []any{map[string]any{
			"coveredResources": covered,
			"flavors":          []any{map[string]any{"name": ns, "resources": resources}},
		}},
	})
	lq := object("LocalQueue", ns, "team-queue", map[string]any{"clusterQueue": ns})
	for _, o := range []*unstructured.Unstructured{flavor, cq, lq} {
		createCleaned(t, e, o)
	}
	return lq.GetName()
}

// createPriorityClass creates a WorkloadPriorityClass (deleted after the
// test) and returns its name.
func createPriorityClass(t *testing.T, e *steps.Env, name string, value int64) string {
	t.Helper()
	o := object("WorkloadPriorityClass", "", name, nil)
	o.Object["value"] = value
	createCleaned(t, e, o)
	return name
}

func object(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	if spec != nil {
		o.Object["spec"] = spec
	}
	o.SetGroupVersionKind(kueueGroup.WithKind(kind))
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

func createCleaned(t *testing.T, e *steps.Env, o *unstructured.Unstructured) {
	t.Helper()
	if err := e.C.Create(t.Context(), o); err != nil {
		t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
	}
	t.Cleanup(func() {
		if err := e.C.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	})
}

// sleeper is a one-worker TrainingJob on the native backend in queue, of
// the given WorkloadPriorityClass, whose rank sleeps until deleted.
func sleeper(ns, name, image, queue, priority string) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{trainingv1alpha1.LabelKueuePriorityClass: priority}},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: "pytorch",
			Backend:   "native",
			Image:     image,
			Command:   []string{"sleep", "3600"},
			Workers:   1,
			QueueName: queue,
			Resources: &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: jobCPU, corev1.ResourceMemory: jobMemory},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: jobMemory},
			}},
		},
	}
}

func create(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob) {
	t.Helper()
	if err := e.C.Create(t.Context(), tj); err != nil {
		t.Fatalf("create TrainingJob %s: %v", tj.Name, err)
	}
}

// waitAdmitted waits until tj reports Queued=False, reason Admitted.
func waitAdmitted(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob) {
	t.Helper()
	waitQueuedCondition(t, e, tj, metav1.ConditionFalse, "Admitted")
}

// waitQueued waits until tj reports Queued=True with reason and returns
// the condition.
func waitQueued(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob, reason string) metav1.Condition {
	t.Helper()
	return waitQueuedCondition(t, e, tj, metav1.ConditionTrue, reason)
}

func waitQueuedCondition(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	steps.Until(t, fmt.Sprintf("TrainingJob %s to be Queued=%s (%s)", tj.Name, status, reason), admitTimeout, func(ctx context.Context) (bool, error) {
		if err := e.C.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(tj.Status.Conditions, trainingv1alpha1.ConditionQueued)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != tj.Generation {
			return false, nil
		}
		got = *c
		return true, nil
	})
	return got
}

// waitPodRunning waits until a pod of tj runs and returns its name.
func waitPodRunning(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob) string {
	t.Helper()
	var name string
	steps.Until(t, fmt.Sprintf("a pod of TrainingJob %s to run", tj.Name), admitTimeout, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.C.List(ctx, &pods, client.InNamespace(tj.Namespace), client.MatchingLabels{trainingv1alpha1.LabelJobName: tj.Name}); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				name = p.Name
				return true, nil
			}
		}
		return false, nil
	})
	return name
}

// holdsQueued checks that tj stays Queued (not admitted, no pod) for
// holdFor: the quota, not slowness, keeps it out.
func holdsQueued(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob) {
	t.Helper()
	deadline := time.Now().Add(holdFor)
	for time.Now().Before(deadline) {
		if err := e.C.Get(t.Context(), client.ObjectKeyFromObject(tj), tj); err != nil {
			t.Fatal(err)
		}
		if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainingv1alpha1.ConditionQueued) {
			t.Fatalf("%s left the queue beyond quota: %+v", tj.Name, tj.Status.Conditions)
		}
		var pods corev1.PodList
		if err := e.C.List(t.Context(), &pods, client.InNamespace(tj.Namespace), client.MatchingLabels{trainingv1alpha1.LabelJobName: tj.Name}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) > 0 {
			t.Fatalf("%s is Queued, yet its pod %s exists", tj.Name, pods.Items[0].Name)
		}
		time.Sleep(steps.Poll)
	}
}
