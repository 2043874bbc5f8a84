package trainingjob

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// workload is a Workload with these conditions, each "type=status/reason:message".
func workload(conds ...[4]string) *unstructured.Unstructured {
	wl := newWorkload()
	var list []any
	for _, c := range conds {
		list = append(list, map[string]any{"type": c[0], "status": c[1], "reason": c[2], "message": c[3]})
	}
	_ = unstructured.SetNestedSlice(wl.Object, list, "status", "conditions")
	return wl
}

func TestWaitMessageIsKueuesOwn(t *testing.T) {
	for name, tc := range map[string]struct {
		wl   *unstructured.Unstructured
		want string
	}{
		"no conditions yet": {wl: workload(), want: ""},
		"no quota": {
			wl:   workload([4]string{"QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu"}),
			want: "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu",
		},
		"preempted": {
			wl: workload(
				[4]string{"QuotaReserved", "False", "Pending", "insufficient quota"},
				[4]string{"Evicted", "True", "Preempted", "Preempted to accommodate a workload due to prioritization in the ClusterQueue"}),
			want: "Preempted: Preempted to accommodate a workload due to prioritization in the ClusterQueue",
		},
		"admitted": {wl: workload([4]string{"QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"}), want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := waitMessage(tc.wl); got != tc.want {
				t.Errorf("waitMessage = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestQueuedConditionCarriesKueuesMessage(t *testing.T) {
	tj := &trainingv1alpha1.TrainingJob{Spec: trainingv1alpha1.TrainingJobSpec{QueueName: "q"}}
	setStatus(tj, observation{
		kind: "Job", jobName: "j-r1", localQueue: "q",
		job:   specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended)),
		queue: &queueObservation{message: "insufficient quota for nvidia.com/gpu"},
	})
	c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.HasSuffix(c.Message, "Kueue: insufficient quota for nvidia.com/gpu") {
		t.Errorf("Queued condition %+v, want Kueue's message", c)
	}
}

func TestWorkloadMapsToItsTrainingJob(t *testing.T) {
	wl := newWorkload()
	wl.SetNamespace("ns")
	_ = unstructured.SetNestedSlice(wl.Object, []any{map[string]any{"name": "main", "template": map[string]any{
		"metadata": map[string]any{"labels": map[string]any{trainingv1alpha1.LabelJobName: "mnist"}},
	}}}, "spec", "podSets")
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "mnist"}}}
	if diff := cmp.Diff(want, workloadToTrainingJob(t.Context(), wl)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if got := workloadToTrainingJob(t.Context(), newWorkload()); got != nil {
		t.Errorf("a Workload of no TrainingJob maps to %v", got)
	}
}

func TestKueueIntegrationNamesTheChildsKind(t *testing.T) {
	for ref, want := range map[trainingv1alpha1.JobReference]string{
		{APIVersion: "batch/v1", Kind: "Job"}:                  "batch/job",
		{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob"}:    "kubeflow.org/pytorchjob",
		{APIVersion: "kubeflow.org/v1", Kind: "MPIJob"}:        "kubeflow.org/mpijob",
		{APIVersion: "kubeflow.org/v1", Kind: "XGBoostJob"}:    "kubeflow.org/xgboostjob",
		{APIVersion: "not/a/group/version", Kind: "PaddleJob"}: "paddlejob",
	} {
		if got := KueueIntegration(ref); got != want {
			t.Errorf("KueueIntegration(%s %s) = %q, want %q", ref.APIVersion, ref.Kind, got, want)
		}
	}
}
