package kueue

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/notebooks"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// cullTimeout bounds the wait for an idle Notebook's cull: the shortest
// idle timeout the API accepts (5m), plus the check period and a loaded
// machine's slack.
const cullTimeout = 15 * time.Minute

// TestIdleGPUNotebookCullFreesTheGPUForAQueuedTraining: the queue's only
// GPU is held by a Notebook that nobody uses, and a TrainingJob asking for
// one GPU waits Queued for it. When the Notebook is culled for being idle
// (the operator's own culling, with the shortest timeouts the platform
// allows), its pod goes, Kueue takes its quota back, and the TrainingJob
// is admitted and runs on the GPU: an idle notebook does not keep a GPU
// from the team's trainings.
func TestIdleGPUNotebookCullFreesTheGPUForAQueuedTraining(t *testing.T) {
	e := steps.Connect(t)
	requireKueue(t, e)
	advertiseGPUs(t, e, 1)
	ns := e.Namespace(t, "e2e-kueue-cull")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	queue := createQueuesWith(t, e, ns, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), gpuResource: resource.MustParse("1"),
	})

	nb := notebooks.NewNotebook(t, ns, "idle-gpu", true)
	nb.Spec.QueueName = queue
	nb.Spec.Resources.Accelerators = &commonv1alpha1.Accelerators{Count: 1}
	notebooks.CreateReady(t, e, nb)
	t.Logf("Notebook %s admitted with the queue's only GPU and Ready", nb.Name)

	waiter := withGPU(sleeper(ns, "waiter", image, queue, ""))
	delete(waiter.Labels, trainingv1alpha1.LabelKueuePriorityClass)
	create(t, e, waiter)
	c := waitQueued(t, e, waiter, "Waiting")
	if !strings.Contains(c.Message, "insufficient unused quota for "+string(gpuResource)) {
		t.Errorf("%s waits, but not for GPU quota: %s", waiter.Name, c.Message)
	}
	t.Logf("TrainingJob %s waits for the GPU: %s", waiter.Name, c.Message)

	steps.Until(t, "Notebook "+nb.Name+" to be culled for being idle", cullTimeout, func(ctx context.Context) (bool, error) {
		if err := e.C.Get(ctx, client.ObjectKeyFromObject(nb), nb); err != nil {
			return false, err
		}
		return nb.Status.Phase == notebooksv1alpha1.PhaseCulled, nil
	})
	t.Logf("Notebook %s culled: %+v", nb.Name, nb.Status.Conditions)

	waitAdmitted(t, e, waiter)
	pod := waitPodRunning(t, e, waiter)
	if n, _ := podGPUs(t, e, ns, pod); n != 1 {
		t.Errorf("pod %s of %s requests %d %s, want 1", pod, waiter.Name, n, gpuResource)
	}
	t.Logf("TrainingJob %s admitted once the cull freed the GPU; pod %s runs on it", waiter.Name, pod)
}
