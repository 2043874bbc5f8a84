package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/crdarrival"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// kubeflowCRDFile is the chart's file of the Kubeflow CRD of a resource,
// such as pytorchjobs.
func kubeflowCRDFile(resource string) string {
	return filepath.Join(chartDir(), "files", "kubeflow-crds", "kubeflow.org_"+resource+".yaml")
}

// deleteKubeflowCRD deletes the Kubeflow CRD of a resource from the
// package's control plane; the API server deletes every object of its kind,
// then the CRD. The tests of this package run one at a time; the cleanup,
// which runs after the test's operator stopped, lets go of held objects of
// the kind, installs the CRD again where the test did not, waits until it
// is served, and restarts kube-controller-manager so that its garbage
// collector watches the kind again at once: the tests after this one find
// the cluster as before.
func deleteKubeflowCRD(t *testing.T, c client.Client, resource string, held ...client.Object) {
	t.Helper()
	name := resource + ".kubeflow.org"
	t.Cleanup(func() {
		for _, obj := range held {
			_ = c.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}
		testenv.Eventually(t, "CRD "+name+" gone or back", func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
			return apierrors.IsNotFound(err) || err == nil && crd.DeletionTimestamp.IsZero(), client.IgnoreNotFound(err)
		})
		if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{kubeflowCRDFile(resource)}}); err != nil {
			t.Errorf("installing CRD %s again: %v", name, err)
			return
		}
		if err := env.RestartControllerManager(); err != nil {
			t.Errorf("restarting kube-controller-manager: %v", err)
		}
	})
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
}

// waitCRDGone waits until the CRD of a Kubeflow resource is gone.
func waitCRDGone(t *testing.T, c client.Client, resource string) {
	t.Helper()
	testenv.Eventually(t, "CRD "+resource+".kubeflow.org gone", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: resource + ".kubeflow.org"}, &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// eventCount sums the occurrences of obj's events of a reason.
func eventCount(ctx context.Context, c client.Client, obj client.Object, reason string) (int32, error) {
	list := &corev1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return 0, err
	}
	var n int32
	for _, e := range list.Items {
		if e.InvolvedObject.UID == obj.GetUID() && e.Reason == reason {
			n += max(e.Count, 1)
		}
	}
	return n, nil
}

func stalledBackendUnavailable(tj *trainingv1alpha1.TrainingJob) bool {
	s := conditions.Get(tj, commonv1alpha1.ConditionStalled)
	return s != nil && s.Status == metav1.ConditionTrue && s.Reason == ReasonBackendUnavailable
}

// waitsQuietly checks that the operator, done with a Stalled job, writes
// nothing more for it (no status, no event, no retried create) when it is
// reconciled again, and that it said BackendUnavailable once and never
// ReconcileError.
func waitsQuietly(t *testing.T, c client.Client, op *operator, tj *trainingv1alpha1.TrainingJob, what string) {
	t.Helper()
	settle(t, c, op, tj.Namespace, tj)
	op.nsWrites.reset()
	poke(t, c, tj)
	consistentlyNoWrites(t, op, tj.Namespace, what)
	for reason, want := range map[string]int32{ReasonBackendUnavailable: 1, phase.ReasonReconcileError: 0} {
		if n, err := eventCount(t.Context(), c, tj, reason); err != nil || n != want {
			t.Errorf("%d %s events (%v), want %d", n, reason, err, want)
		}
	}
}

// TestKubeflowCRDRemovedWhileJobsRun: an administrator uninstalls the
// PyTorchJob CRD while a PyTorch job runs, and the API server deletes
// every PyTorchJob with it. The job waits, Stalled BackendUnavailable with
// a message that says what to do, without a failure, a restart or a retry
// loop; jobs of another Kubeflow kind and of the native backend go on.
// When the CRD is installed again, the job gets a new PyTorchJob for the
// same run and is no longer Stalled.
func TestKubeflowCRDRemovedWhileJobsRun(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	tj := newTrainingJob(ns, "departed", 1)
	tf := newTrainingJob(ns, "stays-tf", 1)
	tf.Spec.Framework = trainingv1alpha1.FrameworkTensorFlow
	native := newTrainingJob(ns, "stays-native", 1)
	native.Spec.Backend = trainingv1alpha1.BackendNative
	for _, obj := range []*trainingv1alpha1.TrainingJob{tj, tf, native} {
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	first := waitPyTorchJob(t, c, ns, "departed-r1")
	setJobStatus(t, c, first, func(s *kubeflowv1.JobStatus) {
		jobCond(s, kubeflowv1.JobCreated, corev1.ConditionTrue, "PyTorchJobCreated", "created")
		jobCond(s, kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "PyTorchJob departed-r1 is running.")
	})
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	createdOf := func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionCreated) && !conditions.IsTrue(tj, commonv1alpha1.ConditionStalled)
	}
	waitTJ(t, c, tf, "the TensorFlow job Created", createdOf)
	waitTJ(t, c, native, "the native job Created", createdOf)

	// A PyTorchJob of somebody else's that a finalizer holds keeps the
	// CRD terminating, as a training-operator's own finalizers may: no
	// PyTorchJob may be created then, and the CRD still exists.
	holder := &kubeflowv1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder", Finalizers: []string{"test.mlplatform.dev/hold"}}}
	holder.Spec.PyTorchReplicaSpecs = first.Spec.PyTorchReplicaSpecs
	if err := c.Create(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	deleteKubeflowCRD(t, c, "pytorchjobs", holder)
	testenv.Eventually(t, "the PyTorchJob of run 1 deleted with its CRD", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(first), &kubeflowv1.PyTorchJob{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	another := func(name string) *kubeflowv1.PyTorchJob {
		return &kubeflowv1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: first.Spec.PyTorchReplicaSpecs}}
	}
	if err := c.Create(t.Context(), another("while-terminating")); !crdarrival.NotServed(err) {
		t.Errorf("a create while the CRD is terminating: %#v, want an error crdarrival.NotServed tells", err)
	}
	got := waitTJ(t, c, tj, "Stalled BackendUnavailable", stalledBackendUnavailable)
	s := conditions.Get(got, commonv1alpha1.ConditionStalled)
	if !strings.Contains(s.Message, "PyTorchJob") || !strings.Contains(s.Message, "no longer served") || !strings.Contains(s.Message, "install") {
		t.Errorf("Stalled message %q: want the PyTorchJob CRD named no longer served, and what to do", s.Message)
	}
	notFailed := func(tj *trainingv1alpha1.TrainingJob) error {
		if conditions.IsFinished(tj) || conditions.IsTrue(tj, trainingv1alpha1.ConditionFinished) || tj.Status.Phase == trainingv1alpha1.PhaseFailed {
			return fmt.Errorf("the job finished: phase %s, conditions %+v", tj.Status.Phase, tj.Status.Conditions)
		}
		if tj.Status.RestartCount != 0 || tj.Status.Run != 1 || len(tj.Status.Runs) != 0 {
			return fmt.Errorf("the lost PyTorchJob counted as a run: restartCount %d, run %d, runs %+v", tj.Status.RestartCount, tj.Status.Run, tj.Status.Runs)
		}
		if conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning) {
			return fmt.Errorf("still Running without its PyTorchJob: %+v", conditions.Get(tj, trainingv1alpha1.ConditionRunning))
		}
		return nil
	}
	if err := notFailed(got); err != nil {
		t.Error(err)
	}

	// The CRD goes once the held PyTorchJob does.
	if err := c.Patch(t.Context(), holder, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
	waitCRDGone(t, c, "pytorchjobs")
	if err := c.Create(t.Context(), another("after-deletion")); !crdarrival.NotServed(err) {
		t.Errorf("a create after the CRD is gone: %#v, want an error crdarrival.NotServed tells", err)
	}
	tfInNowhere := &kubeflowv1.TFJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns + "-missing", Name: "nowhere"}}
	tfInNowhere.Spec.TFReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"Worker": first.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]}
	if err := c.Create(t.Context(), tfInNowhere); !apierrors.IsNotFound(err) || crdarrival.NotServed(err) {
		t.Errorf("a create into a missing namespace: %#v, want a NotFound crdarrival.NotServed does not tell", err)
	}

	// While the CRD is away the job waits: no status write, no event,
	// no retried create, whatever reconciles come.
	waitsQuietly(t, c, op, got, "the operator leaves the waiting job alone while the CRD is away")
	for _, other := range []*trainingv1alpha1.TrainingJob{tf, native} {
		if live, err := getTJ(t.Context(), c, other); err != nil || !createdOf(live) {
			t.Errorf("%s, of another kind, is affected: %v %+v", other.Name, err, live.Status.Conditions)
		}
	}

	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{kubeflowCRDFile("pytorchjobs")}}); err != nil {
		t.Fatal(err)
	}
	var second kubeflowv1.PyTorchJob
	testenv.Eventually(t, "a new PyTorchJob for run 1", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "departed-r1"}, &second)
		return err == nil && second.UID != first.UID, nil
	})
	got = waitTJ(t, c, tj, "Created and no longer Stalled", createdOf)
	if err := notFailed(got); err != nil {
		t.Error(err)
	}
	if n, err := eventCount(t.Context(), c, got, phase.ReasonReconcileError); err != nil || n != 0 {
		t.Errorf("%d ReconcileError events (%v), want none", n, err)
	}
}

// refusingPyTorchJobs is the operator's client, except that while armed
// it answers every create of a PyTorchJob as the API server does while the
// kind's CRD is being deleted.
type refusingPyTorchJobs struct {
	client.Client
	armed atomic.Bool
}

func (c *refusingPyTorchJobs) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*kubeflowv1.PyTorchJob); ok && c.armed.Load() {
		return apierrors.NewForbidden(schema.GroupResource{Group: kubeflowv1.GroupVersion.Group, Resource: "pytorchjobs"}, obj.GetName(),
			errors.New("create not allowed while custom resource definition is terminating"))
	}
	return c.Client.Create(ctx, obj, opts...)
}

// TestAChildCreateRefusedForItsKindStallsTheJob: the create of a child
// finds its kind no longer served before the CRD watch has recorded the
// departure (here, never: the CRD stays). The job is Stalled
// BackendUnavailable, with one event and no ReconcileError, instead of
// retrying the create in a loop; the kind is not made unavailable for
// other jobs on the strength of one answer, so the job's next look
// creates the child once the API server takes it.
func TestAChildCreateRefusedForItsKindStallsTheJob(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	var refusing *refusingPyTorchJobs
	op := startOperator(t, func(r *Reconciler) {
		refusing = &refusingPyTorchJobs{Client: r.Client}
		refusing.armed.Store(true)
		r.Client = refusing
	})
	tj := newTrainingJob(ns, "refused", 1)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "Stalled BackendUnavailable", stalledBackendUnavailable)
	if s := conditions.Get(got, commonv1alpha1.ConditionStalled); !strings.Contains(s.Message, "PyTorchJob CRD") {
		t.Errorf("Stalled message %q: want the PyTorchJob CRD named", s.Message)
	}
	waitsQuietly(t, c, op, got, "the operator writes nothing more while the kind is refused")
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "refused-r1"}, &kubeflowv1.PyTorchJob{}); !apierrors.IsNotFound(err) {
		t.Fatalf("PyTorchJob refused-r1: %v, want none", err)
	}

	refusing.armed.Store(false)
	poke(t, c, tj)
	waitPyTorchJob(t, c, ns, "refused-r1")
	waitTJ(t, c, tj, "Created and no longer Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionCreated) && !conditions.IsTrue(tj, commonv1alpha1.ConditionStalled)
	})
}
