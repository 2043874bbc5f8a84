package featurestore_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// assertedMetrics names, for each metric the operator defines, the test
// that drives it and asserts its value; TestEveryMetricIsAsserted fails on
// a metric added without an entry.
var assertedMetrics = map[string]string{
	"mlplatform_featurestore_provisioning_duration_seconds": "TestMetricsThroughTheReconciler",
	"mlplatform_featurestore_cleanup_failures_total":        "TestMetricsThroughTheReconciler",
	"mlplatform_featurestore_stores":                        "TestMetricsThroughTheReconciler",
	"mlplatform_featurestore_featurestores":                 "TestMetricsThroughTheReconciler",
}

func TestEveryMetricIsAsserted(t *testing.T) {
	// The series are created with the reconciler; create them here too so
	// the guard does not depend on a test that started an operator first.
	featurestore.NewStoreMetrics()
	claims.NewCleanupFailures()
	metricstest.RequireAsserted(t, assertedMetrics, []string{"mlplatform_featurestore_"},
		featurestore.NewStoresCollector(nil), featurestore.NewStateCollector(nil))
}

func TestStateOf(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: "R", ObservedGeneration: 2}
	}
	for name, tc := range map[string]struct {
		observed int64
		deleting bool
		conds    []metav1.Condition
		want     string
	}{
		"ready":                       {2, false, []metav1.Condition{cond(commonv1alpha1.ConditionReady, metav1.ConditionTrue)}, featurestore.StateReady},
		"ready, spec change not seen": {1, false, []metav1.Condition{cond(commonv1alpha1.ConditionReady, metav1.ConditionTrue)}, featurestore.StateProgressing},
		"waiting":                     {2, false, []metav1.Condition{cond(commonv1alpha1.ConditionReady, metav1.ConditionFalse)}, featurestore.StateProgressing},
		"no status yet":               {0, false, nil, featurestore.StateProgressing},
		"stalled":                     {2, false, []metav1.Condition{cond(commonv1alpha1.ConditionReady, metav1.ConditionFalse), cond(commonv1alpha1.ConditionStalled, metav1.ConditionTrue)}, featurestore.StateStalled},
		"deleting while ready":        {2, true, []metav1.Condition{cond(commonv1alpha1.ConditionReady, metav1.ConditionTrue)}, featurestore.StateDeleting},
		"deleting while stalled":      {2, true, []metav1.Condition{cond(commonv1alpha1.ConditionStalled, metav1.ConditionTrue)}, featurestore.StateDeleting},
	} {
		t.Run(name, func(t *testing.T) {
			fs := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			fs.Status.ObservedGeneration, fs.Status.Conditions = tc.observed, tc.conds
			if tc.deleting {
				fs.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			if got := featurestore.StateOf(fs); got != tc.want {
				t.Errorf("StateOf = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestMetricsThroughTheReconciler provisions a store, lets a second one
// conflict with it, and deletes the first while PostgreSQL is down: the
// provisioning times, the stores and FeatureStores counted by state, and
// the failed cleanups must show each step. The provisioning and cleanup
// series have no namespace, so they are compared with what they were
// before the step (the package's tests run one after another).
func TestMetricsThroughTheReconciler(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	states := metricstest.Collect(t, featurestore.NewStateCollector(c))
	stateCount := func(state string) float64 {
		return metricstest.ValueFrom(t, states, "mlplatform_featurestore_featurestores", map[string]string{"namespace": ns, "state": state})
	}
	// Reading through a client kept to the namespace keeps the count to
	// this test's stores.
	stores := metricstest.Collect(t, featurestore.NewStoresCollector(client.NewNamespacedClient(c, ns)))
	provisioned := func(store string) uint64 {
		n, _ := metricstest.Histogram(t, "mlplatform_featurestore_provisioning_duration_seconds", map[string]string{"store": store, "result": "success"})
		return n
	}
	before := map[string]uint64{}
	for _, s := range []string{"online", "offline", "registry"} {
		before[s] = provisioned(s)
	}
	phasesBefore := phaseRuns(t)

	fs := waitReady(t, c, createStore(t, c, newStore(ns, "metered", "metered").obj()))
	requirePhasesTimed(t, phasesBefore)
	for _, s := range []string{"online", "offline", "registry"} {
		if provisioned(s) <= before[s] {
			t.Errorf("provisioning_duration_seconds{store=%s,result=success} did not grow (%d before and after)", s, before[s])
		}
	}
	if got := metricstest.ValueFrom(t, stores, "mlplatform_featurestore_stores", map[string]string{"store": "offline", "mode": "backend"}); got != 1 {
		t.Errorf("stores{offline,backend} = %v, want 1", got)
	}
	if got := metricstest.ValueFrom(t, stores, "mlplatform_featurestore_stores", map[string]string{"store": "offline", "mode": "managed"}); got != 0 {
		t.Errorf("stores{offline,managed} = %v, want 0", got)
	}

	// A store that stays also keeps the package's final password scan
	// meaningful: its Secrets hold passwords the tests saw.
	waitReady(t, c, createStore(t, c, newStore(ns, "kept", "kept").obj()))
	// A project that ends with another's on the same Redis is refused.
	conflict := createStore(t, c, newStore(ns, "premetered", "premetered").obj())
	waitCondition(t, c, conflict, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, featuresv1alpha1.ReasonConflict)
	testenv.Eventually(t, "two Ready and one Stalled FeatureStore counted", func(context.Context) (bool, error) {
		return stateCount(featurestore.StateReady) == 2 && stateCount(featurestore.StateStalled) == 1, nil
	})

	failuresBefore := metricstest.Value(t, "mlplatform_featurestore_cleanup_failures_total", map[string]string{"origin": "featurestore"})
	stopPostgres(t)
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, c, fs, commonv1alpha1.ConditionCleanupFailed, metav1.ConditionTrue, commonv1alpha1.ReasonCleanupError)
	if got := metricstest.Value(t, "mlplatform_featurestore_cleanup_failures_total", map[string]string{"origin": "featurestore"}); got <= failuresBefore {
		t.Errorf("cleanup_failures_total{origin=featurestore} = %v, want more than %v", got, failuresBefore)
	}
	if got := stateCount(featurestore.StateDeleting); got != 1 {
		t.Errorf("Deleting FeatureStores = %v, want 1", got)
	}
	startPostgres(t)
	testenv.WaitGone(t, c, fs)
	// Two stores are left: "kept", Ready, and "premetered", whose conflict
	// ended with the deleted store, so that it may be in any state on its
	// way from Stalled to Ready when this reads.
	testenv.Eventually(t, "the deleted store no longer counted", func(context.Context) (bool, error) {
		left := 0.0
		for _, s := range []string{featurestore.StateReady, featurestore.StateProgressing, featurestore.StateStalled} {
			left += stateCount(s)
		}
		return stateCount(featurestore.StateDeleting) == 0 && stateCount(featurestore.StateReady) >= 1 && left == 2, nil
	})
}

// timedPhases are phases of both reconcilers that run on the way to a
// Ready store; the skeleton's runner times each.
var timedPhases = [][2]string{
	{"featurestore", "ensureCredentials"}, {"featurestore", "ensureOnlineStore"},
	{"featurestore", "ensureRegistry"}, {"featurestore", "status"},
	{"featurestorebackend", "observeUsers"}, {"featurestorebackend", "checkServer"}, {"featurestorebackend", "status"},
}

// phaseRuns reads mlplatform_reconcile_phase_duration_seconds' sample
// count of each of timedPhases.
func phaseRuns(t *testing.T) map[[2]string]uint64 {
	t.Helper()
	out := map[[2]string]uint64{}
	for _, p := range timedPhases {
		out[p], _ = metricstest.Histogram(t, "mlplatform_reconcile_phase_duration_seconds", map[string]string{"controller": p[0], "phase": p[1]})
	}
	return out
}

// requirePhasesTimed waits until every one of timedPhases ran since before
// was read. The backend's phases run when a store that uses it arrives,
// which the store's readiness does not wait for.
func requirePhasesTimed(t *testing.T, before map[[2]string]uint64) {
	t.Helper()
	testenv.Eventually(t, "every phase timed in phase_duration_seconds", func(context.Context) (bool, error) {
		after := phaseRuns(t)
		for _, p := range timedPhases {
			if after[p] <= before[p] {
				return false, nil
			}
		}
		return true, nil
	})
}
