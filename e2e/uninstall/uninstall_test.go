package uninstall

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/quickstart"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// UninstallEnv must be 1, besides ML_PLATFORM_E2E, for this suite to run.
const UninstallEnv = "ML_PLATFORM_E2E_UNINSTALL"

const (
	readyTimeout  = 10 * time.Minute
	deleteTimeout = 5 * time.Minute
)

func quantity(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// objects are one of each kind, each with a volume: the Notebook's and the
// FeatureStore's with Delete, the TrainingJob's checkpoint with Retain.
func objects(ns string) (*notebooksv1alpha1.Notebook, *featuresv1alpha1.FeatureStore, *trainingv1alpha1.TrainingJob) {
	nb := &notebooksv1alpha1.Notebook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nb"}, Spec: notebooksv1alpha1.NotebookSpec{
		Workspace: notebooksv1alpha1.Workspace{Size: quantity("64Mi"), DeletionPolicy: commonv1alpha1.DeletionPolicyDelete},
	}}
	managed := &featuresv1alpha1.ManagedServer{Storage: quantity("64Mi")}
	fs := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fs"}, Spec: featuresv1alpha1.FeatureStoreSpec{
		Project:        "uninstall",
		OnlineStore:    featuresv1alpha1.StoreSource{Managed: managed},
		OfflineStore:   featuresv1alpha1.StoreSource{Managed: managed},
		Registry:       featuresv1alpha1.StoreSource{Managed: managed},
		DeletionPolicy: commonv1alpha1.DeletionPolicyDelete,
	}}
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tj"}, Spec: trainingv1alpha1.TrainingJobSpec{
		Framework: "pytorch", Workers: 1,
		Command:    []string{"sh", "-c", "exit 0"},
		Checkpoint: &trainingv1alpha1.Checkpoint{Size: quantity("64Mi"), DeletionPolicy: commonv1alpha1.DeletionPolicyRetain},
	}}
	return nb, fs, tj
}

// TestUninstallLeavesOnlyRetained: with objects of every kind in place,
// deleting every custom resource and then the release leaves no custom
// resource, no workload, no PVC but the retained checkpoint, and no Secret
// of the platform's.
func TestUninstallLeavesOnlyRetained(t *testing.T) {
	e := steps.Connect(t)
	if os.Getenv(UninstallEnv) != "1" {
		t.Skipf("removes the platform from the cluster: runs only with %s=1 (make e2e sets it for this suite)", UninstallEnv)
	}
	ns := e.Namespace(t, "e2e-uninstall")
	nb, fs, tj := objects(ns)
	nb.Spec.Image, tj.Spec.Image = steps.Image(t, "jupyter"), steps.Image(t, "pytorch")
	for _, o := range []client.Object{nb, fs, tj} {
		if err := e.C.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	e.WaitCondition(t, nb, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	e.WaitCondition(t, fs, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", readyTimeout)
	retained := tj.Status.CheckpointClaim

	deleteEverything(t, e)
	helm(t, "uninstall", quickstart.Release, "--namespace", quickstart.Namespace, "--wait", "--timeout", "5m")

	// helm uninstall --wait waits for the Deployments to go; their pods
	// then stop within their grace period.
	steps.Until(t, "no pod left in "+quickstart.Namespace+" after uninstall", deleteTimeout, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.C.List(ctx, &pods, client.InNamespace(quickstart.Namespace)); err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	// Owned objects go through the garbage collector, which takes a while.
	var left []string
	steps.Until(t, "only the retained checkpoint claim to be left", deleteTimeout, func(ctx context.Context) (bool, error) {
		var pvcs corev1.PersistentVolumeClaimList
		var secrets corev1.SecretList
		if err := e.C.List(ctx, &pvcs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if err := e.C.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
			return false, err
		}
		left = nil
		for _, p := range pvcs.Items {
			if p.Name != retained {
				left = append(left, "PVC "+p.Name)
			}
		}
		for _, s := range secrets.Items {
			left = append(left, "Secret "+s.Name)
		}
		t.Logf("left: %v", left)
		return len(left) == 0 && len(pvcs.Items) == 1, nil
	})
}

// deleteEverything deletes every object of the platform's kinds in every
// namespace and waits until they are gone: a finalizer that never clears
// fails the test here.
func deleteEverything(t *testing.T, e *steps.Env) {
	t.Helper()
	lists := []client.ObjectList{
		&trainingv1alpha1.TrainingJobList{}, &notebooksv1alpha1.NotebookList{},
		&featuresv1alpha1.FeatureStoreList{}, &featuresv1alpha1.FeatureStoreBackendList{},
	}
	for _, l := range lists {
		objs := listed(t, e, l)
		for _, o := range objs {
			if err := e.C.Delete(t.Context(), o); client.IgnoreNotFound(err) != nil {
				t.Fatalf("delete %T %s: %v", o, client.ObjectKeyFromObject(o), err)
			}
		}
	}
	for _, l := range lists {
		steps.Until(t, "every custom resource to be gone", deleteTimeout, func(ctx context.Context) (bool, error) {
			return len(listed(t, e, l)) == 0, nil
		})
	}
}

func listed(t *testing.T, e *steps.Env, l client.ObjectList) []client.Object {
	t.Helper()
	if err := e.C.List(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	var out []client.Object
	switch l := l.(type) {
	case *trainingv1alpha1.TrainingJobList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *notebooksv1alpha1.NotebookList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *featuresv1alpha1.FeatureStoreList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *featuresv1alpha1.FeatureStoreBackendList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}

// helm runs the repository's pinned Helm (hack/tool.sh) on the cluster of
// $KUBECONFIG.
func helm(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.Command("../../hack/tool.sh", "helm").Output()
	if err != nil {
		t.Fatalf("hack/tool.sh helm: %v", err)
	}
	out, err := exec.Command(strings.TrimSpace(string(path)), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, out)
	}
}
