package metricstest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ml-platform/ml-platform/shared/metrics"
)

// recorder collects a guard's complaints instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestGuardSample asserts the metric the guard's own test defines.
func TestGuardSample(t *testing.T) {
	c := metrics.NewCounterVec("guardtest", "asserted_total", "Asserted.", "l")
	c.WithLabelValues("x").Add(3)
	if got := Value(t, "mlplatform_guardtest_asserted_total", map[string]string{"l": "x"}); got != 3 {
		t.Errorf("value %v, want 3", got)
	}
	if got := Value(t, "mlplatform_guardtest_asserted_total", map[string]string{"l": "other"}); got != 0 {
		t.Errorf("value of a series that does not exist %v, want 0", got)
	}
	h := metrics.NewHistogramVec("guardtest", "wait_seconds", "Waits.", nil)
	h.WithLabelValues().Observe(2)
	h.WithLabelValues().Observe(5)
	if n, sum := Histogram(t, "mlplatform_guardtest_wait_seconds", map[string]string{}); n != 2 || sum != 7 {
		t.Errorf("histogram count %d sum %v, want 2 and 7", n, sum)
	}
}

func TestRequireAssertedFindsEveryGap(t *testing.T) {
	metrics.NewCounterVec("guardtest", "asserted_total", "Asserted.", "l")
	metrics.NewHistogramVec("guardtest", "wait_seconds", "Waits.", nil)
	metrics.NewCounterVec("guardtest", "forgotten_total", "Nobody asserts it.")
	for name, tc := range map[string]struct {
		asserted map[string]string
		want     []string
	}{
		"complete": {
			asserted: map[string]string{
				"mlplatform_guardtest_asserted_total": "TestGuardSample", "mlplatform_guardtest_wait_seconds": "TestGuardSample",
				"mlplatform_guardtest_forgotten_total": "TestRequireAssertedFindsEveryGap",
			},
		},
		"a defined metric not listed": {
			asserted: map[string]string{"mlplatform_guardtest_asserted_total": "TestGuardSample", "mlplatform_guardtest_wait_seconds": "TestGuardSample"},
			want:     []string{"mlplatform_guardtest_forgotten_total is defined but no test asserts it"},
		},
		"listed under a test that does not exist or does not name it": {
			asserted: map[string]string{
				"mlplatform_guardtest_asserted_total": "TestNothing", "mlplatform_guardtest_wait_seconds": "TestRequireAssertedFindsEveryGapX",
				"mlplatform_guardtest_forgotten_total": "TestGuardSample",
			},
			want: []string{
				"mlplatform_guardtest_asserted_total: the test TestNothing does not exist",
				"mlplatform_guardtest_forgotten_total: the test TestGuardSample never names it",
				"mlplatform_guardtest_wait_seconds: the test TestRequireAssertedFindsEveryGapX does not exist",
			},
		},
		"asserted in another directory's test": {
			asserted: map[string]string{
				"mlplatform_guardtest_asserted_total": "../metricstest/TestGuardSample", "mlplatform_guardtest_wait_seconds": "TestGuardSample",
				"mlplatform_guardtest_forgotten_total": "..//TestRequireAssertedFindsEveryGap",
			},
			want: []string{"mlplatform_guardtest_forgotten_total: the test ..//TestRequireAssertedFindsEveryGap does not exist"},
		},
		"listed but not defined": {
			asserted: map[string]string{
				"mlplatform_guardtest_asserted_total": "TestGuardSample", "mlplatform_guardtest_wait_seconds": "TestGuardSample",
				"mlplatform_guardtest_forgotten_total": "TestRequireAssertedFindsEveryGap", "mlplatform_guardtest_gone_total": "TestGuardSample",
			},
			want: []string{"mlplatform_guardtest_gone_total is listed as asserted but not defined"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{TB: t}
			RequireAsserted(r, tc.asserted, []string{"mlplatform_guardtest_"})
			slices.Sort(r.errs)
			if len(r.errs) != len(tc.want) {
				t.Fatalf("complaints %q, want %q", r.errs, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(r.errs[i], w) {
					t.Errorf("complaint %q, want it to start with %q", r.errs[i], w)
				}
			}
		})
	}
}
