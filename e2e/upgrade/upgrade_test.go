package upgrade

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/quickstart"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// CmdEnv is the shell command that upgrades the installed platform to the
// working tree (hack/e2e/upgrade-from.sh sets it).
const CmdEnv = "ML_PLATFORM_E2E_UPGRADE_CMD"

// Bounds, not expectations: two shared cores.
const (
	readyTimeout   = 15 * time.Minute
	upgradeTimeout = 20 * time.Minute
	// stableFor is how long the pods are watched after the upgrade: the new
	// operators have reconciled everything by then.
	stableFor = 90 * time.Second
)

var small = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
}

// TestUpgradeKeepsEverythingWorking: objects of every kind created on the
// earlier version, a training running and a notebook serving during the
// upgrade; afterwards the CRDs are the working tree's, the operators run
// the new images, no pod of the objects was replaced or restarted, the job
// finishes on the backend it started on in its first run, and new objects
// work.
func TestUpgradeKeepsEverythingWorking(t *testing.T) {
	e := steps.Connect(t)
	cmd := os.Getenv(CmdEnv)
	if cmd == "" {
		t.Skipf("needs the platform of an earlier revision installed and %s: run hack/e2e/upgrade-from.sh", CmdEnv)
	}
	ns := e.Namespace(t, "e2e-upgrade")
	nb, fs, tj := objects(t, ns)
	for _, o := range []client.Object{nb, fs} {
		if err := e.C.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	createWithoutBackend(t, e, tj)
	e.WaitCondition(t, nb, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	e.WaitCondition(t, fs, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	e.WaitCondition(t, tj, trainingv1alpha1.ConditionRunning, metav1.ConditionTrue, "Failed", readyTimeout)
	startedOn := backendOf(tj)
	t.Logf("before the upgrade: job %s on backend %q (status.backend %q, child %+v)", tj.Name, startedOn, tj.Status.Backend, tj.Status.Job)
	before, err := PodStates(t.Context(), e.C, ns)
	if err != nil {
		t.Fatal(err)
	}

	upgrade(t, cmd)
	operatorsUpgraded(t, e)
	drift, n, err := CRDDrift(t.Context(), e.C, quickstart.RepoRoot+"/charts")
	if err != nil || n == 0 || len(drift) > 0 {
		t.Errorf("CRDs after the upgrade (%d compared): %v %v", n, drift, err)
	}
	podsUnchanged(t, e, ns, before)

	e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", readyTimeout)
	if tj.Status.Backend != startedOn || tj.Status.Run != 1 {
		t.Errorf("job %s: backend %q run %d after the upgrade; it started on %q in run 1", tj.Name, tj.Status.Backend, tj.Status.Run, startedOn)
	}
	noChildOfOtherBackend(t, e, tj, startedOn)
	e.WaitCondition(t, nb, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	e.WaitCondition(t, fs, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)

	after := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after"}, Spec: trainingv1alpha1.TrainingJobSpec{
		Framework: "pytorch", Image: steps.Image(t, "pytorch"), Workers: 1,
		Resources: &commonv1alpha1.Resources{ResourceRequirements: small},
		Env:       []corev1.EnvVar{{Name: "TRAIN_STEPS", Value: "5"}},
	}}
	if err := e.C.Create(t.Context(), after); err != nil {
		t.Fatal(err)
	}
	e.WaitCondition(t, after, "Succeeded", metav1.ConditionTrue, "Failed", readyTimeout)
}

// objects are one of each kind. The job trains for a few minutes so that
// it runs through the upgrade, and keeps its pods for the audit.
func objects(t *testing.T, ns string) (*notebooksv1alpha1.Notebook, *featuresv1alpha1.FeatureStore, *trainingv1alpha1.TrainingJob) {
	size := ptr.To(resource.MustParse("64Mi"))
	nb := &notebooksv1alpha1.Notebook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nb"}, Spec: notebooksv1alpha1.NotebookSpec{
		Image: steps.Image(t, "jupyter"), Resources: commonv1alpha1.Resources{ResourceRequirements: small},
		Workspace: notebooksv1alpha1.Workspace{Size: size, DeletionPolicy: commonv1alpha1.DeletionPolicyDelete},
	}}
	managed := &featuresv1alpha1.ManagedServer{Storage: size}
	fs := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fs"}, Spec: featuresv1alpha1.FeatureStoreSpec{
		Project:     "upgrade",
		OnlineStore: featuresv1alpha1.StoreSource{Managed: managed}, OfflineStore: featuresv1alpha1.StoreSource{Managed: managed},
		Registry: featuresv1alpha1.StoreSource{Managed: managed}, DeletionPolicy: commonv1alpha1.DeletionPolicyDelete,
	}}
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "through"}, Spec: trainingv1alpha1.TrainingJobSpec{
		Framework: "pytorch", Image: steps.Image(t, "pytorch"), Workers: 2,
		Resources: &commonv1alpha1.Resources{ResourceRequirements: small},
		Env: []corev1.EnvVar{
			{Name: "TRAIN_STEPS", Value: "90"}, {Name: "STEP_SECONDS", Value: "2"}, {Name: "CHECKPOINT_EVERY", Value: "30"},
		},
		RunPolicy: trainingv1alpha1.RunPolicy{CleanPodPolicy: "None"},
	}}
	return nb, fs, tj
}

// createWithoutBackend creates tj with no spec.backend: the earlier
// version's default decides, as it did for the users' jobs.
func createWithoutBackend(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(trainingv1alpha1.GroupVersion.WithKind("TrainingJob"))
	unstructured.RemoveNestedField(u.Object, "spec", "backend")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := e.C.Create(t.Context(), u); err != nil {
		t.Fatalf("create TrainingJob %s: %v", tj.Name, err)
	}
}

// backendOf is the backend a job runs on, from status.backend or, for an
// operator that did not record it, from the kind of its child.
func backendOf(tj *trainingv1alpha1.TrainingJob) trainingv1alpha1.Backend {
	switch {
	case tj.Status.Backend != "":
		return tj.Status.Backend
	case tj.Status.Job != nil && strings.HasPrefix(tj.Status.Job.APIVersion, "kubeflow.org/"):
		return trainingv1alpha1.BackendKubeflow
	case tj.Status.Job != nil && tj.Status.Job.APIVersion == "batch/v1":
		return trainingv1alpha1.BackendNative
	}
	return ""
}

func upgrade(t *testing.T, cmd string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), upgradeTimeout)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, "bash", "-c", cmd).CombinedOutput()
	t.Logf("upgrade (%s, %s):\n%s", cmd, time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
}

// operatorsUpgraded waits until every operator runs the working tree's
// image (the chart's tag, not the earlier revision's upgrade-from-*).
func operatorsUpgraded(t *testing.T, e *steps.Env) {
	t.Helper()
	for _, op := range quickstart.Operators {
		d := e.OperatorDeployment(t, op)
		steps.Until(t, d.Name+" to run the new image", readyTimeout, func(ctx context.Context) (bool, error) {
			ok, err := e.RolledOut(ctx, d)
			if !ok || err != nil {
				return false, err
			}
			image := d.Spec.Template.Spec.Containers[0].Image
			return !strings.Contains(image, ":upgrade-from-"), nil
		})
	}
}

// podsUnchanged watches the namespace's pods for stableFor after the
// upgrade: none of those that ran before may be replaced or restarted.
func podsUnchanged(t *testing.T, e *steps.Env, ns string, before map[string]PodState) {
	t.Helper()
	deadline := time.Now().Add(stableFor)
	for time.Now().Before(deadline) {
		now, err := PodStates(t.Context(), e.C, ns)
		if err != nil {
			t.Fatal(err)
		}
		if changed := Changed(before, now); len(changed) > 0 {
			t.Fatalf("pods changed by the upgrade: %v", changed)
		}
		time.Sleep(steps.Poll)
	}
	t.Logf("%d pods unchanged for %s after the upgrade", len(before), stableFor)
}

// noChildOfOtherBackend: a job on the kubeflow backend got no batch Job, a
// native one no Kubeflow job (listed by the job-name label).
func noChildOfOtherBackend(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob, backend trainingv1alpha1.Backend) {
	t.Helper()
	if backend != trainingv1alpha1.BackendKubeflow {
		return
	}
	var jobs batchv1.JobList
	if err := e.C.List(t.Context(), &jobs, client.InNamespace(tj.Namespace), client.MatchingLabels{trainingv1alpha1.LabelJobName: tj.Name}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) > 0 {
		t.Errorf("job %s started on kubeflow got %d batch Jobs after the upgrade (a second training)", tj.Name, len(jobs.Items))
	}
}
