package notebook

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// assertedMetrics names, for each metric of the Notebook operator, the
// test that drives it and asserts its value; the probe metrics are the
// jupyter package's. TestEveryMetricIsAsserted fails on a metric added
// without an entry.
var assertedMetrics = map[string]string{
	"mlplatform_notebook_running":                             "TestNotebookMetrics",
	"mlplatform_notebook_culls_total":                         "TestNotebookMetrics",
	"mlplatform_notebook_idle_seconds_at_cull":                "TestNotebookMetrics",
	"mlplatform_notebook_accelerator_seconds_reclaimed_total": "TestNotebookMetrics",
	"mlplatform_notebook_notebooks":                           "TestNotebookMetrics",
	"mlplatform_notebook_probe_duration_seconds":              "../../jupyter/TestProbeMetrics",
	"mlplatform_notebook_probe_failures_total":                "../../jupyter/TestProbeMetrics",
}

func TestEveryMetricIsAsserted(t *testing.T) {
	newNotebookMetrics()
	metricstest.RequireAsserted(t, assertedMetrics, []string{"mlplatform_notebook_"}, NewPhaseCollector(nil))
}

// TestNotebookMetrics runs a Notebook with two GPUs, culls it after 66
// idle minutes and deletes it an hour later, and reads each metric by its
// exported name. The culling and reclaim series are process-wide, so they
// are compared with their values before the test.
func TestNotebookMetrics(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	m := op.reconciler.metrics
	phases := metricstest.Collect(t, NewPhaseCollector(c))
	inPhase := func(phase string) float64 {
		return metricstest.ValueFrom(t, phases, "mlplatform_notebook_notebooks", map[string]string{"namespace": ns, "phase": phase})
	}
	idle := map[string]string{"reason": notebooksv1alpha1.ReasonIdle}
	cullsBefore := metricstest.Value(t, "mlplatform_notebook_culls_total", idle)
	idleCountBefore, idleSumBefore := metricstest.Histogram(t, "mlplatform_notebook_idle_seconds_at_cull", idle)
	gpu := map[string]string{"type": "gpu"}
	reclaimedBefore := metricstest.Value(t, "mlplatform_notebook_accelerator_seconds_reclaimed_total", gpu)
	// The running gauge counts the Notebooks this process's operators run,
	// earlier tests' too: it must match the operator's own record.
	runningMatches := func(want bool) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			m.mu.Lock()
			n, runs := len(m.runners), m.runners[client.ObjectKey{Namespace: ns, Name: "metered"}]
			m.mu.Unlock()
			return runs == want && metricstest.Value(t, "mlplatform_notebook_running", map[string]string{}) == float64(n), nil
		}
	}

	nb := newNotebook(ns, "metered")
	nb.Spec.Resources.Accelerators = &commonv1alpha1.Accelerators{Count: 2, Type: "gpu"}
	nb = runningNotebook(t, c, op, nb, op.clock.Now())
	testenv.Eventually(t, "counted as Running", func(context.Context) (bool, error) { return inPhase("Running") == 1, nil })
	testenv.Eventually(t, "the running gauge counts it", runningMatches(true))

	cullIdle(t, c, op, nb)
	if d := metricstest.Value(t, "mlplatform_notebook_culls_total", idle) - cullsBefore; d != 1 {
		t.Errorf("culls_total{reason=Idle} grew by %v, want 1", d)
	}
	n, sum := metricstest.Histogram(t, "mlplatform_notebook_idle_seconds_at_cull", idle)
	if n-idleCountBefore != 1 || sum-idleSumBefore != 66*60 {
		t.Errorf("idle_seconds_at_cull{reason=Idle} grew by %d observations summing to %v, want 1 of %d", n-idleCountBefore, sum-idleSumBefore, 66*60)
	}
	testenv.Eventually(t, "counted as Culled, no longer Running", func(context.Context) (bool, error) {
		return inPhase("Culled") == 1 && inPhase("Running") == 0, nil
	})
	testenv.Eventually(t, "the running gauge no longer counts it", runningMatches(false))

	// Deleted an hour after the cull: two GPUs freed for that hour.
	op.clock.Step(time.Hour)
	if err := c.Delete(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "2 GPUs x 1 hour reclaimed", func(context.Context) (bool, error) {
		return metricstest.Value(t, "mlplatform_notebook_accelerator_seconds_reclaimed_total", gpu)-reclaimedBefore == 2*3600, nil
	})
	testenv.Eventually(t, "the deleted Notebook no longer counted", func(context.Context) (bool, error) {
		return inPhase("Culled") == 0, nil
	})
}
