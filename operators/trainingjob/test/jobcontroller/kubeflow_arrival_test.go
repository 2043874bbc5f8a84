package jobcontroller

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestKubeflowCRDsInstalledLaterArePickedUp starts the operator in a
// cluster without the Kubeflow CRDs, as `make quickstart` leaves it, then
// installs them one kind first, as a cluster that serves only some
// Kubeflow kinds has them (the MPI Operator's v2beta1 MPIJob beside the
// training-operator's other kinds): the PyTorch job that was Stalled for
// want of its kind gets its PyTorchJob without an operator restart while
// the TensorFlow job stays Stalled naming its own missing kind, and gets
// its TFJob once that CRD comes too. The CRDs stay installed for the rest
// of the package, whose other tests run on the native backend.
func TestKubeflowCRDsInstalledLaterArePickedUp(t *testing.T) {
	c, ns := setup(t)
	tj := newTJ(ns, "late", 1)
	tj.Spec.Backend = trainingv1alpha1.BackendKubeflow
	tf := newTJ(ns, "late-tf", 1)
	tf.Spec.Framework, tf.Spec.Backend = trainingv1alpha1.FrameworkTensorFlow, trainingv1alpha1.BackendKubeflow
	for _, obj := range []*trainingv1alpha1.TrainingJob{tj, tf} {
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	stalled := func(kind string) func(*trainingv1alpha1.TrainingJob) bool {
		return func(tj *trainingv1alpha1.TrainingJob) bool {
			s := conditions.Get(tj, commonv1alpha1.ConditionStalled)
			return s != nil && s.Reason == "BackendUnavailable" && strings.Contains(s.Message, kind)
		}
	}
	got := waitTJ(t, c, tj, "Stalled BackendUnavailable", stalled("PyTorchJob"))
	if s := conditions.Get(got, commonv1alpha1.ConditionStalled); !strings.Contains(s.Message, "not installed") || strings.Contains(s.Message, "restart the operator") {
		t.Errorf("Stalled message %q: want the CRD named missing, without asking for a restart", s.Message)
	}
	waitTJ(t, c, tf, "Stalled BackendUnavailable", stalled("TFJob"))
	// A native job beside it runs meanwhile.
	fresh := newTJ(ns, "fresh", 1)
	if err := c.Create(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}
	waitPods(t, c, ns, "fresh-r1", 1)

	crds := filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator", "files", "kubeflow-crds")
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(crds, "kubeflow.org_pytorchjobs.yaml")}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the operator creates the PyTorchJob of run 1", func(ctx context.Context) (bool, error) {
		// Until the API server serves the kind, the client cannot map it.
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late-r1"}, &kubeflowv1.PyTorchJob{})
		return err == nil, nil
	})
	waitTJ(t, c, tj, "Created and no longer Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionCreated) && !conditions.IsTrue(tj, commonv1alpha1.ConditionStalled) &&
			tj.Status.Job != nil && tj.Status.Job.Kind == kubeflowv1.PyTorchJobKind
	})
	poked := tf.DeepCopy()
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(tf), poked); err != nil {
		t.Fatal(err)
	}
	if !stalled("TFJob")(poked) {
		t.Errorf("the TensorFlow job, whose kind is still missing, is not Stalled for it: %+v", poked.Status.Conditions)
	}

	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{crds}}); err != nil {
		t.Fatal(err)
	}
	waitTJ(t, c, tf, "TFJob created", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionCreated) && tj.Status.Job != nil && tj.Status.Job.Kind == kubeflowv1.TFJobKind
	})
}
