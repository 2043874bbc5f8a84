package finalizer

import (
	"testing"
	"time"
)

func TestRetryAfterGrowsGeometricallyAndIsBounded(t *testing.T) {
	cases := map[string]struct {
		elapsed time.Duration
		want    time.Duration
	}{
		"just deleted":  {elapsed: 0, want: time.Second},
		"ten seconds":   {elapsed: 10 * time.Second, want: 5 * time.Second},
		"one minute":    {elapsed: time.Minute, want: 30 * time.Second},
		"past the caps": {elapsed: time.Hour, want: 5 * time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := retryAfter(tc.elapsed); got != tc.want {
				t.Errorf("retryAfter(%s) = %s, want %s", tc.elapsed, got, tc.want)
			}
		})
	}
	// Following the schedule from the deletion request, attempts happen at
	// 1, 2, 3, 4.5, 6.75 ... seconds: each wait is half the elapsed time.
	elapsed, attempts := time.Duration(0), 0
	for elapsed < 15*time.Minute {
		elapsed += retryAfter(elapsed)
		attempts++
	}
	if attempts < 10 || attempts > 20 {
		t.Errorf("%d attempts in the first 15 minutes; want a handful, not hundreds", attempts)
	}
}

func TestAbandonAnnotationUsesTheFinalizersGroup(t *testing.T) {
	f := &Finalizer{Name: "features.mlplatform.dev/cleanup"}
	if got := f.AbandonAnnotation(); got != "features.mlplatform.dev/abandon-cleanup" {
		t.Errorf("AbandonAnnotation() = %q", got)
	}
}
