package featurestores

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/notebooks"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

const boundTimeout = 20 * time.Minute

// TestBoundNotebookAndTrainingJobConnect: a Notebook and a TrainingJob that
// reference a tenant's FeatureStore get its feature_store.yaml mounted, and
// code in them connects with that file to the store's own database and
// keys.
func TestBoundNotebookAndTrainingJobConnect(t *testing.T) {
	e := steps.Connect(t)
	srv := startServers(t, e)
	pg, redis := srv.backends(t, e)
	tn := newTenant(t, e, "bound", pg, redis, commonv1alpha1.DeletionPolicyDelete)
	tn.ready(t, e)
	ref := []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: tn.fs.Name}}}
	want := "BOUND db=" + tn.fs.Status.OfflineStore.Database + " redis="

	t.Run("TrainingJob", func(t *testing.T) {
		tj := &trainingv1alpha1.TrainingJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "bound"},
			Spec: trainingv1alpha1.TrainingJobSpec{
				Framework: "pytorch", Image: steps.Image(t, "pytorch"), Workers: 1,
				Command: []string{"/usr/bin/python3", "-c", steps.FeastClient},
				Env:     []corev1.EnvVar{{Name: "WHO", Value: "trainingjob"}},
				Resources: &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				}},
				RunPolicy:     trainingv1alpha1.RunPolicy{CleanPodPolicy: "None"},
				FeatureStores: ref,
			},
		}
		if err := e.C.Create(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
		e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", boundTimeout)
		logs := steps.JobLogs(t, e, tj, tj.Status.Run)
		if !strings.Contains(logs, want+"trainingjob") {
			t.Errorf("the TrainingJob's pod did not connect with the mounted configuration: %q, want %q", logs, want+"trainingjob")
		}
	})

	t.Run("Notebook", func(t *testing.T) {
		nb := notebooks.NewNotebook(t, tn.ns, "bound", false)
		nb.Spec.FeatureStores = ref
		notebooks.CreateReady(t, e, nb)
		code := "import os; os.environ['WHO'] = 'notebook'\n" + steps.FeastClient
		out := e.MustRun(t, tn.ns, notebooks.KernelPod(t, nb, "bound-kernel", code))
		if !strings.Contains(out, want+"notebook") {
			t.Errorf("the Notebook's kernel did not connect with the mounted configuration: %q, want %q", out, want+"notebook")
		}
	})
}
