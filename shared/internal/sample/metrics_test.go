package sample

import (
	"testing"

	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
)

// sharedMetrics are the series every operator exports through the shared
// libraries, with the test of this package that asserts each.
// (mlplatform_objects_stalled is asserted by TestStalledObjectsMetric,
// mlplatform_reconcile_phase_duration_seconds by shared/phase's
// TestPhaseDurationHistogram; neither is defined through shared/metrics.)
var sharedMetrics = map[string]string{
	"mlplatform_finalizer_cleanup_failures_total":  "TestFailingCleanupKeepsFinalizerThenStallsThenFinishes",
	"mlplatform_finalizer_cleanup_abandoned_total": "TestAbandonAnnotationNeedsTheVerb",
	"mlplatform_reconcile_panics_total":            "TestPanicInReconcileIsReportedAndRetried",
}

// TestEverySharedMetricIsAsserted fails when shared/finalizer or
// shared/panics defines a metric that no test of this package asserts.
func TestEverySharedMetricIsAsserted(t *testing.T) {
	metricstest.RequireAsserted(t, sharedMetrics, []string{"mlplatform_finalizer_", "mlplatform_reconcile_"})
}
