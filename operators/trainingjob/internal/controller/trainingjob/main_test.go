package trainingjob

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	trainingtesting "github.com/ml-platform/ml-platform/apis/training/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

const operatorName = OperatorName

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
)

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator") }

// TestMain starts one control plane with the Kubeflow CRDs and
// kube-controller-manager (for owner reference cascades). The TrainingJob
// CRD and the operator's RBAC come from installing the chart, see
// operatorConfig.
func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = trainingv1alpha1.AddToScheme(scheme)
	_ = kubeflowv1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(chartDir(), "files", "kubeflow-crds")},
		ControllerManager: true,
	}, &env)
}

var (
	chartOnce   sync.Once
	chartErr    error
	chartConfig *rest.Config
)

// chartNamespace and chartRelease are where the chart is installed.
const (
	chartNamespace = "mlp-system"
	chartRelease   = "trainingjob-operator"
)

// operatorConfig installs the chart once (its CRD, ServiceAccount and
// RBAC) and returns a config that impersonates the chart's ServiceAccount:
// every integration test thereby proves that the chart grants the operator
// enough, and the chart test proves it grants no more than listed.
func operatorConfig(t testing.TB) *rest.Config {
	t.Helper()
	chartOnce.Do(func() {
		_, chartErr = charttest.Install(env.Config, chartDir(), chartRelease, chartNamespace, map[string]any{}, t.Logf)
		if chartErr != nil {
			return
		}
		if chartErr = waitCRD(env.Config); chartErr != nil {
			return
		}
		// The garbage collector learns of the chart's CRD at once.
		if chartErr = env.RestartControllerManager(); chartErr != nil {
			return
		}
		chartConfig = charttest.ImpersonateServiceAccount(env.Config, chartNamespace, operatorName)
		// Every test then runs the operator under the chart's owned-objects
		// policy, which the API server loads asynchronously.
		chartErr = waitOwnedObjectsPolicy(chartConfig)
	})
	if chartErr != nil {
		t.Fatalf("installing the chart: %v", chartErr)
	}
	return chartConfig
}

// waitOwnedObjectsPolicy waits until the chart's owned-objects policy
// refuses the operator an unlabelled Secret.
func waitOwnedObjectsPolicy(operator *rest.Config) error {
	c, err := client.New(operator, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: chartNamespace, Name: "unlabelled"}}
	return wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return deniedByOwnedObjectsPolicy(c.Create(ctx, unlabelled.DeepCopy(), client.DryRunAll)), nil
	})
}

// waitCRD waits until the chart's CRD is served.
func waitCRD(cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.List(ctx, &trainingv1alpha1.TrainingJobList{})
		return err == nil, nil
	})
}

func adminClient(t *testing.T) client.Client {
	t.Helper()
	operatorConfig(t)
	return env.AdminClient(t, scheme)
}

func createNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	name := testenv.CreateNamespace(t, c, "tj")
	// Later tests' operators reconcile whatever earlier tests left; the
	// namespace controller of kube-controller-manager removes it all.
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return name
}

var testSettings = backend.Settings{
	OperatorName: operatorName,
	Catalog: accelerator.Catalog{DefaultType: "a100", Classes: []accelerator.Class{
		{Type: "a100", ResourceName: "nvidia.com/gpu", NodeSelector: map[string]string{"gpu": "a100"}},
	}},
	SharedMemorySize: resource.MustParse("1Gi"),
	RunAsUser:        1000,
}

// operator is a running manager with the TrainingJob reconciler, talking
// to the test API server as the chart's ServiceAccount, through a write
// counter.
type operator struct {
	*operatortest.Operator
	reconciler *Reconciler
	writes     *testenv.WriteCounter
	// nsWrites counts writes per namespace, for assertions that must not
	// see the operator finishing work in namespaces that earlier tests
	// left behind and that are still being deleted.
	nsWrites namespaceWrites
}

// defaultBackend is the operator's default in these tests: kubeflow, which
// the tests written for it assume; the native backend's tests name their
// backend in the spec.
const defaultBackend = trainingv1alpha1.BackendKubeflow

func startOperator(t *testing.T, tune func(*Reconciler)) *operator {
	t.Helper()
	op := &operator{}
	op.Operator, op.reconciler = operatortest.StartController(t, operatortest.Options{
		RESTConfig: operatorConfig(t),
		Manager: manager.Options{
			Name:                 operatorName,
			Scheme:               scheme,
			OwnedObjects:         OwnedObjects(),
			OptionalOwnedObjects: OptionalOwnedObjects(),
			Fields:               CacheFields(),
		},
	}, operatortest.Controller[*Reconciler]{
		Build: func(mgr ctrl.Manager, _ manager.Config) (*Reconciler, error) {
			return NewReconciler(mgr, testSettings, defaultBackend)
		},
		Tune: tune,
	})
	op.writes = op.Writes
	op.nsWrites = namespaceWrites{op.Writes}
	return op
}

// namespaceWrites reads the operator's writes by namespace.
type namespaceWrites struct{ counter *testenv.WriteCounter }

// in returns the writes into namespace ns since the last reset.
func (w namespaceWrites) in(ns string) []testenv.Write { return w.counter.Namespace(ns).Writes() }

func (w namespaceWrites) reset() { w.counter.Reset() }

// settle waits until the operator is done with what the test did so far:
// its cache holds objs as the API server does (so its own writes have come
// back through its watches) and it has not written into ns for a second,
// events included. Counting writes after it counts only what comes next.
func settle(t *testing.T, c client.Client, op *operator, ns string, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		testenv.Eventually(t, "the operator's cache holds "+obj.GetName(), func(ctx context.Context) (bool, error) {
			live := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
				return false, err
			}
			cached := obj.DeepCopyObject().(client.Object)
			if err := op.reconciler.Client.Get(ctx, client.ObjectKeyFromObject(obj), cached); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return cached.GetResourceVersion() == live.GetResourceVersion(), nil
		})
	}
	op.Writes.Namespace(ns).WaitQuiet(t, time.Second)
}

func (op *operator) stop(t *testing.T) {
	t.Helper()
	op.Stop(t)
}

func newTrainingJob(ns, name string, workers int32) *trainingv1alpha1.TrainingJob {
	return trainingtesting.MakeTrainingJob(ns, name, workers).Obj()
}

func getTJ(ctx context.Context, c client.Client, tj *trainingv1alpha1.TrainingJob) (*trainingv1alpha1.TrainingJob, error) {
	got := &trainingv1alpha1.TrainingJob{}
	err := c.Get(ctx, client.ObjectKeyFromObject(tj), got)
	return got, err
}

// waitTJ polls until check accepts the TrainingJob and returns it.
func waitTJ(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob, what string, check func(*trainingv1alpha1.TrainingJob) bool) *trainingv1alpha1.TrainingJob {
	t.Helper()
	var got *trainingv1alpha1.TrainingJob
	testenv.Eventually(t, what, func(ctx context.Context) (bool, error) {
		var err error
		got, err = getTJ(ctx, c, tj)
		if err != nil {
			return false, err
		}
		return check(got), nil
	})
	return got
}

func waitPyTorchJob(t *testing.T, c client.Client, ns, name string) *kubeflowv1.PyTorchJob {
	t.Helper()
	job := &kubeflowv1.PyTorchJob{}
	testenv.Eventually(t, "PyTorchJob "+name+" exists", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
		return err == nil, client.IgnoreNotFound(err)
	})
	return job
}

// setJobStatus acts out the Kubeflow training-operator: it sets the job's
// conditions (each True in order, the earlier ones as Kubeflow leaves them)
// and replica counts.
func setJobStatus(t *testing.T, c client.Client, job *kubeflowv1.PyTorchJob, mutate func(*kubeflowv1.JobStatus)) {
	t.Helper()
	testenv.Eventually(t, "update PyTorchJob status", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		mutate(&job.Status)
		err := c.Status().Update(ctx, job)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// jobCond sets a Kubeflow job condition, as the training-operator does:
// the new condition True, Running made False by a terminal condition.
func jobCond(s *kubeflowv1.JobStatus, typ kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason, message string) {
	now := metav1.Now()
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			s.Conditions[i].Status, s.Conditions[i].Reason, s.Conditions[i].Message = status, reason, message
			s.Conditions[i].LastTransitionTime, s.Conditions[i].LastUpdateTime = now, now
			return
		}
	}
	s.Conditions = append(s.Conditions, kubeflowv1.JobCondition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: now, LastUpdateTime: now})
}

// testClock is a clock.PassiveClock tests move forward, for TTLs and
// backoffs, without racing the operator that reads it.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *testClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// poke makes the operator reconcile a TrainingJob now, through an
// annotation (every update of the object is watched). A job already gone
// needs no poke: a reconcile under way may have deleted it (a TTL that a
// test's clock just made pass), and the caller's wait says whether that
// was right.
func poke(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob) {
	t.Helper()
	p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"test.mlplatform.dev/poke":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	if err := c.Patch(t.Context(), tj.DeepCopy(), p); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// consistentlyJobs checks that tj's Kubeflow jobs stay exactly want for a
// window: a wrong restart or a job created behind a suspension shows up
// whenever it comes within it.
func consistentlyJobs(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob, want []string) {
	t.Helper()
	testenv.Consistently(t, "the Kubeflow jobs of "+tj.Name+" stay "+fmt.Sprint(want), 3*time.Second, func(context.Context) error {
		if diff := cmp.Diff(want, jobsOf(t, c, tj)); diff != "" {
			return fmt.Errorf("Kubeflow jobs (-want +got):\n%s", diff)
		}
		return nil
	})
}

// consistentlyNoWrites checks that the operator writes nothing into ns for
// a window, whatever its own reconciles (a restarted operator's initial
// ones, say) do meanwhile.
func consistentlyNoWrites(t *testing.T, op *operator, ns, what string) {
	t.Helper()
	testenv.Consistently(t, what, 3*time.Second, func(context.Context) error {
		if w := op.nsWrites.in(ns); len(w) != 0 {
			return fmt.Errorf("%d writes: %+v", len(w), w)
		}
		return nil
	})
}
