package jobcontroller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/conditions"
	workload "github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/kueue"
)

// TestKueueInstalledLaterIsWatched starts the operator in a cluster without
// Kueue and creates a queued job, which nothing can admit: past the grace it
// is Stalled, saying that Kueue is not installed and which integration it
// needs. Then the real Kueue is installed and started: the job shows
// Kueue's reason for its wait from the Workload Kueue made, and is no longer
// Stalled, without an operator restart. Kueue's CRDs stay installed for the rest
// of the package, whose other jobs name no queue.
func TestKueueInstalledLaterIsWatched(t *testing.T) {
	scheme := harness.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	op, err := harness.StartOperator(env.Config, scheme, harness.Options{WorkloadGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	if op.Reconciler.WatchesWorkloads {
		t.Fatal("Kueue's Workload CRD is installed already: this test needs the operator to start without it")
	}
	ns := testenv.CreateNamespace(t, c, "kueuelate")

	tj := newTJ(ns, "waits", 1)
	tj.Spec.QueueName = "team-queue"
	tj.Spec.Resources = &commonv1alpha1.Resources{
		ResourceRequirements: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		Accelerators:         &commonv1alpha1.Accelerators{Count: 2},
	}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{}
	testenv.Eventually(t, "the Job is created suspended", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "waits-r1"}, job)
		return err == nil && ptr.Deref(job.Spec.Suspend, false), client.IgnoreNotFound(err)
	})

	stalled := waitTJ(t, c, tj, "Stalled: Kueue is not installed", func(tj *trainingv1alpha1.TrainingJob) bool {
		s := conditions.Get(tj, commonv1alpha1.ConditionStalled)
		return s != nil && s.Status == "True" && s.Reason == "NoWorkload" &&
			strings.Contains(s.Message, "Kueue is not installed") && strings.Contains(s.Message, `"batch/job"`)
	})
	t.Logf("Stalled without Kueue: %s", conditions.Get(stalled, commonv1alpha1.ConditionStalled).Message)
	// Stalled for good: neither a restarted operator nor its look at the
	// end of each grace writes the same status again (it set Stalled with
	// a new transition time at every look, 2 000 writes a minute for 4 000
	// such jobs at the default grace).
	if err := op.Stop(); err != nil {
		t.Fatal(err)
	}
	op, err = harness.StartOperator(env.Config, scheme, harness.Options{WorkloadGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	testenv.Consistently(t, "a restarted operator leaves the Stalled job's status alone for 2.5 graces", 5*time.Second, func(ctx context.Context) error {
		now := &trainingv1alpha1.TrainingJob{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), now); err != nil {
			return err
		}
		if now.ResourceVersion != stalled.ResourceVersion {
			return fmt.Errorf("status written again: Stalled %+v", conditions.Get(now, commonv1alpha1.ConditionStalled))
		}
		return nil
	})

	kueue.ForTest(t, env, "kueue", kueue.Options{Frameworks: []string{"batch/job"}})
	flavor := ns + "-flavor"
	objs := []*unstructured.Unstructured{
		kueue.Object("ResourceFlavor", "", flavor, map[string]any{}),
		kueue.Object("ClusterQueue", "", flavor, map[string]any{"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: ns}},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "nvidia.com/gpu"},
				"flavors": []any{map[string]any{"name": flavor, "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": "4"},
					map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "1"},
				}}},
			}},
		}}),
		kueue.Object("LocalQueue", ns, "team-queue", map[string]any{"spec": map[string]any{"clusterQueue": flavor}}),
	}
	kueue.CreateAll(t, c, objs...)
	kueue.WaitActive(t, c, objs[1])

	var kueueMsg string
	testenv.Eventually(t, "Kueue keeps the Workload of waits-r1 without quota", func(ctx context.Context) (bool, error) {
		items, err := workload.WorkloadsOf(ctx, c, ns, job.UID)
		if err != nil || len(items) == 0 {
			return false, err
		}
		kueueMsg = workload.WaitMessage(&items[0])
		return strings.Contains(kueueMsg, "insufficient"), nil
	})
	got := waitTJ(t, c, tj, "Queued with Kueue's reason", func(tj *trainingv1alpha1.TrainingJob) bool {
		q := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return q != nil && q.Status == "True" && strings.Contains(q.Message, kueueMsg) && conditions.Get(tj, commonv1alpha1.ConditionStalled) == nil
	})
	t.Logf("Queued condition once Kueue appeared: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
}
