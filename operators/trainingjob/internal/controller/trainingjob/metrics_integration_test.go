package trainingjob

import (
	"context"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestMetricsThroughTheReconciler runs a TrainingJob through the operator
// until its only allowed run is preempted, and reads what the reconciler
// recorded: the job created, the time to running, the failure with its
// duration, the restarts exhausted, and the scrape-time count by phase.
func TestMetricsThroughTheReconciler(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)
	phases := metricstest.Collect(t, NewPhaseCollector(c))
	countIn := func(phase string) float64 {
		return metricstest.ValueFrom(t, phases, "mlplatform_trainingjob_trainingjobs", map[string]string{"namespace": ns, "phase": phase})
	}

	tj := checkpointed(ns, "metered", 1, 0, 0)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "metered-r1")
	nsFw := map[string]string{"namespace": ns, "framework": "pytorch"}
	if got := metricstest.Value(t, "mlplatform_trainingjob_created_total", nsFw); got != 1 {
		t.Errorf("created_total = %v, want 1", got)
	}
	pods := startPods(t, c, job)
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionRunning)
	})
	testenv.Eventually(t, "one Running TrainingJob counted", func(context.Context) (bool, error) {
		return countIn("Running") == 1, nil
	})
	if n, _ := metricstest.Histogram(t, "mlplatform_trainingjob_time_to_running_seconds", nsFw); n != 1 {
		t.Errorf("time_to_running_seconds has %d observations, want 1", n)
	}

	// maxRestarts is 0: a preemption, which a new run would fix, fails the job.
	disrupt(t, c, pods[kubeflowv1.PyTorchJobReplicaTypeMaster], corev1.PodReasonPreemptionByScheduler)
	failJob(t, c, job)
	waitTJ(t, c, tj, "Failed", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionFailed)
	})
	testenv.Eventually(t, "the failure recorded in the metrics", func(context.Context) (bool, error) {
		return metricstest.Value(t, "mlplatform_trainingjob_failed_total", nsFw) == 1, nil
	})
	if got := metricstest.Value(t, "mlplatform_trainingjob_restarts_exhausted_total", map[string]string{"namespace": ns}); got != 1 {
		t.Errorf("restarts_exhausted_total = %v, want 1", got)
	}
	if n, _ := metricstest.Histogram(t, "mlplatform_trainingjob_duration_seconds", map[string]string{"namespace": ns, "framework": "pytorch", "outcome": "failed"}); n != 1 {
		t.Errorf("duration_seconds{outcome=failed} has %d observations, want 1", n)
	}
	testenv.Eventually(t, "the job counted as Failed, no longer Running", func(context.Context) (bool, error) {
		return countIn("Failed") == 1 && countIn("Running") == 0, nil
	})
	if got := metricstest.Value(t, "mlplatform_trainingjob_created_total", nsFw); got != 1 {
		t.Errorf("created_total = %v after the failure, want still 1", got)
	}
}
