package kueuecompat

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	trainingtesting "github.com/ml-platform/ml-platform/apis/training/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/kueue"
)

var (
	env    *testenv.Env
	scheme *runtime.Scheme
)

// TestMain starts one control plane with the real Job controller (it
// creates a Job's pods once Kueue unsuspends it; no scheduler or kubelet
// runs, so they stay Pending) and an audit log of every write, from which
// the tests count what the operator and Kueue each wrote.
//
// The API server runs with front-proxy certificates so that its
// aggregator can forward the callers of Kueue's visibility API to Kueue;
// testenv makes them in its own folder and removes them with it.
func TestMain(m *testing.M) {
	scheme = harness.Scheme()
	testenv.Main(m, testenv.Options{ControllerManager: true, Controllers: []string{"job-controller"}, AuditWrites: true, FrontProxy: true}, &env)
}

// The chart is installed once: its CRD, ServiceAccount and RBAC. The
// operator runs as that ServiceAccount, so these tests also prove that
// the chart lets it read Kueue's Workloads.
const (
	chartNamespace = "mlp-system"
	chartRelease   = "trainingjob-operator"
)

var (
	chartOnce   sync.Once
	chartErr    error
	operatorCfg *rest.Config
)

// operatorUser is the operator's identity in the audit log.
var operatorUser = fmt.Sprintf("system:serviceaccount:%s:%s", chartNamespace, harness.OperatorName)

// kueueUser is Kueue's identity in the audit log.
const kueueUser = "kueue"

// stack is one test's view of the running system.
type stack struct {
	c     client.Client
	ns    string
	kueue *kueue.Kueue
	op    *harness.Operator
}

// startStack installs the chart (once), starts a fresh Kueue without its
// visibility server and the operator for this test, and creates the
// test's namespace. It skips the test only when the Kueue binary cannot be
// built.
func startStack(t *testing.T) *stack {
	t.Helper()
	return startStackWith(t, stackOptions{})
}

// stackOptions vary what startStackWith starts.
type stackOptions struct {
	// visibility starts Kueue's visibility server (the pendingworkloads
	// API) and registers its APIServices.
	visibility bool
	// operator tunes the operator.
	operator harness.Options
	// kubeflow installs the Kubeflow training-operator's CRDs before
	// Kueue starts and switches on Kueue's PyTorchJob integration: Kueue
	// sets up an integration only for a kind served when it starts. The
	// CRDs stay for the rest of the package, whose other jobs are native.
	kubeflow bool
	// kubeflowWithoutIntegration installs the Kubeflow CRDs but leaves
	// Kueue's PyTorchJob integration off.
	kubeflowWithoutIntegration bool
}

func startStackWith(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	chartOnce.Do(func() {
		if _, chartErr = charttest.Install(env.Config, filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator"), chartRelease, chartNamespace, map[string]any{}, t.Logf); chartErr != nil {
			return
		}
		if chartErr = waitServed(env.Config); chartErr != nil {
			return
		}
		// The garbage collector learns of the chart's CRD at once.
		if chartErr = env.RestartControllerManager(); chartErr != nil {
			return
		}
		operatorCfg = charttest.ImpersonateServiceAccount(env.Config, chartNamespace, harness.OperatorName)
	})
	if chartErr != nil {
		t.Fatalf("installing the chart: %v", chartErr)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{c: c}
	// Kueue with the batch/Job integration the native backend needs; the
	// test is skipped when Kueue cannot be built.
	frameworks := []string{"batch/job"}
	if opts.kubeflow || opts.kubeflowWithoutIntegration {
		installKubeflowCRDs(t)
	}
	if opts.kubeflow {
		frameworks = append(frameworks, kueuePyTorchJobFramework)
	}
	s.kueue = kueue.ForTest(t, env, kueueUser, kueue.Options{Frameworks: frameworks, Visibility: opts.visibility})
	s.op, err = harness.StartOperator(operatorCfg, scheme, opts.operator)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.op.Stop() })
	s.ns = testenv.CreateNamespace(t, c, "kueue")
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})
	})
	return s
}

// kueuePyTorchJobFramework is the name of Kueue's integration of the
// Kubeflow PyTorchJob in its configuration.
const kueuePyTorchJobFramework = "kubeflow.org/pytorchjob"

// installKubeflowCRDs installs the chart's Kubeflow CRDs and waits until
// they are served.
func installKubeflowCRDs(t *testing.T) {
	t.Helper()
	crds := filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator", "files", "kubeflow-crds")
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{crds}}); err != nil {
		t.Fatal(err)
	}
}

// waitServed waits until the chart's CRD is served.
func waitServed(cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return c.List(ctx, &trainingv1alpha1.TrainingJobList{}) == nil, nil
	})
}

// kueueGV is the version Kueue v0.17 stores its objects in.
var kueueGV = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

// quota is a ClusterQueue's nominal quota of each resource.
type quota struct{ cpu, memory, gpu string }

// flavorSelector and flavorToleration are what the test's ResourceFlavor
// makes Kueue inject into an admitted Job's pod template.
const flavorLabel = "cloud.example.com/flavor"

var flavorToleration = corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// createQueues creates a ResourceFlavor, a ClusterQueue with q that serves
// only the test's namespace and preempts lower priorities within itself,
// and a LocalQueue named queue in the namespace pointing at it.
func (s *stack) createQueues(t *testing.T, queue string, q quota) {
	t.Helper()
	flavor := s.ns + "-" + queue
	objs := []*unstructured.Unstructured{
		kueue.Object("ResourceFlavor", "", flavor, map[string]any{"spec": map[string]any{
			"nodeLabels":  map[string]any{flavorLabel: flavor},
			"tolerations": []any{map[string]any{"key": flavorToleration.Key, "operator": string(flavorToleration.Operator), "effect": string(flavorToleration.Effect)}},
		}}),
		kueue.Object("ClusterQueue", "", flavor, map[string]any{"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: s.ns}},
			"preemption":        map[string]any{"withinClusterQueue": "LowerPriority"},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "memory", gpuResource},
				"flavors": []any{map[string]any{"name": flavor, "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": q.cpu},
					map[string]any{"name": "memory", "nominalQuota": q.memory},
					map[string]any{"name": gpuResource, "nominalQuota": q.gpu},
				}}},
			}},
		}}),
		kueue.Object("LocalQueue", s.ns, queue, map[string]any{"spec": map[string]any{"clusterQueue": flavor}}),
	}
	kueue.CreateAll(t, s.c, objs...)
	// Kueue admits nothing into a ClusterQueue it has not yet marked
	// Active (flavors found, quota valid).
	kueue.WaitActive(t, s.c, objs[1])
}

// createPriorityClass creates a WorkloadPriorityClass.
func (s *stack) createPriorityClass(t *testing.T, name string, value int64) {
	t.Helper()
	o := kueue.Object("WorkloadPriorityClass", "", name, map[string]any{"value": value})
	if err := s.c.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.Delete(context.Background(), o) })
}

// gpuResource is the GPU-like extended resource of the default
// accelerator catalog the operator runs with.
const gpuResource = "nvidia.com/gpu"

// trainingJob is a native PyTorch TrainingJob in queue whose pods each
// request one CPU, 1Gi and gpus accelerators.
func (s *stack) trainingJob(name, queue string, workers, gpus int32) *trainingv1alpha1.TrainingJob {
	tj := trainingtesting.MakeTrainingJob(s.ns, name, workers).Queue(queue).Obj()
	tj.Spec.Backend = trainingv1alpha1.BackendNative
	tj.Spec.Resources = &commonv1alpha1.Resources{
		ResourceRequirements: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
		}},
		Accelerators: &commonv1alpha1.Accelerators{Count: gpus},
	}
	return tj
}

func (s *stack) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := s.c.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
}

// waitTJ polls until check accepts the TrainingJob and returns it.
func (s *stack) waitTJ(t *testing.T, tj *trainingv1alpha1.TrainingJob, what string, check func(*trainingv1alpha1.TrainingJob) bool) *trainingv1alpha1.TrainingJob {
	t.Helper()
	got := &trainingv1alpha1.TrainingJob{}
	testenv.Eventually(t, tj.Name+": "+what, func(ctx context.Context) (bool, error) {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, err
		}
		return check(got), nil
	})
	return got
}

// waitJob polls until the run's Job exists and check accepts it.
func (s *stack) waitJob(t *testing.T, name, what string, check func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	testenv.Eventually(t, "Job "+name+": "+what, func(ctx context.Context) (bool, error) {
		err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, job)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && check(job), err
	})
	return job
}

// workloadOf returns the Workload Kueue made for job, nil while none.
func (s *stack) workloadOf(ctx context.Context, job *batchv1.Job) (*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kueueGV.WithKind("WorkloadList"))
	if err := s.c.List(ctx, list, client.InNamespace(s.ns)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].GetOwnerReferences() {
			if ref.UID == job.UID {
				return &list.Items[i], nil
			}
		}
	}
	return nil, nil
}

// waitWorkload polls until job's Workload exists and check accepts it.
func (s *stack) waitWorkload(t *testing.T, job *batchv1.Job, what string, check func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var wl *unstructured.Unstructured
	testenv.Eventually(t, "Workload of "+job.Name+": "+what, func(ctx context.Context) (bool, error) {
		var err error
		wl, err = s.workloadOf(ctx, job)
		return wl != nil && check(wl), err
	})
	return wl
}

// condition returns the status, reason and message of a condition of an
// unstructured object.
func condition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return status, reason, message
		}
	}
	return "", "", ""
}

func conditionStatus(u *unstructured.Unstructured, typ string) string {
	status, _, _ := condition(u, typ)
	return status
}

// podsOf lists the pods of a Job.
func (s *stack) podsOf(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := s.c.List(ctx, pods, client.InNamespace(s.ns), client.MatchingLabels{batchv1.JobNameLabel: job.Name})
	return pods.Items, err
}
