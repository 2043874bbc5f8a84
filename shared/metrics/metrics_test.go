package metrics

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestCollectorsAreNamedAndRegistered(t *testing.T) {
	testCases := map[string]struct {
		record   func(t *testing.T)
		name     string
		wantText string
	}{
		"counter": {
			record: func(t *testing.T) {
				unregisterOnCleanup(t, NewCounterVec("metricstest", "reconciles_total", "Reconciles by result.", "result")).WithLabelValues("success").Add(2)
			},
			name: "mlplatform_metricstest_reconciles_total",
			wantText: `
# HELP mlplatform_metricstest_reconciles_total Reconciles by result.
# TYPE mlplatform_metricstest_reconciles_total counter
mlplatform_metricstest_reconciles_total{result="success"} 2
`,
		},
		"gauge": {
			record: func(t *testing.T) {
				unregisterOnCleanup(t, NewGaugeVec("metricstest", "jobs", "Jobs by phase.", "phase")).WithLabelValues("Running").Set(3)
			},
			name: "mlplatform_metricstest_jobs",
			wantText: `
# HELP mlplatform_metricstest_jobs Jobs by phase.
# TYPE mlplatform_metricstest_jobs gauge
mlplatform_metricstest_jobs{phase="Running"} 3
`,
		},
		"histogram with explicit buckets": {
			record: func(t *testing.T) {
				unregisterOnCleanup(t, NewHistogramVec("metricstest", "wait_seconds", "Wait time.", []float64{1, 10}, "queue")).WithLabelValues("a").Observe(5)
			},
			name: "mlplatform_metricstest_wait_seconds",
			wantText: `
# HELP mlplatform_metricstest_wait_seconds Wait time.
# TYPE mlplatform_metricstest_wait_seconds histogram
mlplatform_metricstest_wait_seconds_bucket{queue="a",le="1"} 0
mlplatform_metricstest_wait_seconds_bucket{queue="a",le="10"} 1
mlplatform_metricstest_wait_seconds_bucket{queue="a",le="+Inf"} 1
mlplatform_metricstest_wait_seconds_sum{queue="a"} 5
mlplatform_metricstest_wait_seconds_count{queue="a"} 1
`,
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			tc.record(t)
			if err := testutil.GatherAndCompare(ctrlmetrics.Registry, strings.NewReader(tc.wantText), tc.name); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRegisteringTwiceReusesTheCollector(t *testing.T) {
	first := unregisterOnCleanup(t, NewCounterVec("metricstest", "twice_total", "Registered twice.", "kind"))
	second := NewCounterVec("metricstest", "twice_total", "Registered twice.", "kind")
	if first != second {
		t.Fatal("second registration returned a new collector; increments through it would never be exported")
	}
	first.WithLabelValues("a").Inc()
	second.WithLabelValues("a").Inc()
	if got := testutil.ToFloat64(first.WithLabelValues("a")); got != 2 {
		t.Errorf("counter = %v, want 2", got)
	}
	if got, err := testutil.GatherAndCount(ctrlmetrics.Registry, "mlplatform_metricstest_twice_total"); err != nil || got != 1 {
		t.Errorf("exported series = %d (err %v), want 1", got, err)
	}

	h1 := unregisterOnCleanup(t, NewHistogramVec("metricstest", "twice_seconds", "Registered twice.", nil))
	h2 := NewHistogramVec("metricstest", "twice_seconds", "Registered twice.", nil)
	if h1 != h2 {
		t.Error("second histogram registration returned a new collector")
	}
	g1 := unregisterOnCleanup(t, NewGaugeVec("metricstest", "twice", "Registered twice."))
	g2 := NewGaugeVec("metricstest", "twice", "Registered twice.")
	if g1 != g2 {
		t.Error("second gauge registration returned a new collector")
	}
}

func TestHistogramDefaultsToDurationBuckets(t *testing.T) {
	unregisterOnCleanup(t, NewHistogramVec("metricstest", "default_buckets_seconds", "Default buckets.", nil)).WithLabelValues().Observe(0.01)

	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, f := range families {
		if f.GetName() != "mlplatform_metricstest_default_buckets_seconds" {
			continue
		}
		for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
			got = append(got, b.GetUpperBound())
		}
	}
	if diff := cmp.Diff(DurationBuckets, got); diff != "" {
		t.Errorf("bucket upper bounds (-want +got):\n%s", diff)
	}
}

func TestConflictingRegistrationPanics(t *testing.T) {
	testCases := map[string]struct {
		registerSecond func(prometheus.Registerer)
	}{
		"different labels": {
			registerSecond: func(reg prometheus.Registerer) {
				register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conflict_total", Help: "h"}, []string{"other"}))
			},
		},
		"different type, same descriptor": {
			registerSecond: func(reg prometheus.Registerer) {
				register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "conflict_total", Help: "h"}, []string{"l"}))
			},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conflict_total", Help: "h"}, []string{"l"}))
			defer func() {
				if recover() == nil {
					t.Error("conflicting registration did not panic")
				}
			}()
			tc.registerSecond(reg)
		})
	}
}

// unregisterOnCleanup leaves the global registry as the test found it, so
// that a rerun (go test -count) starts from empty collectors.
func unregisterOnCleanup[T prometheus.Collector](t *testing.T, c T) T {
	t.Helper()
	t.Cleanup(func() { ctrlmetrics.Registry.Unregister(c) })
	return c
}

func registry() prometheus.Gatherer { return ctrlmetrics.Registry }

func unregister(c prometheus.Collector) { ctrlmetrics.Registry.Unregister(c) }
