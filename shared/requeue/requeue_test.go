package requeue

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestShortest(t *testing.T) {
	none, short, long := ctrl.Result{}, ctrl.Result{RequeueAfter: time.Second}, ctrl.Result{RequeueAfter: time.Minute}
	cases := map[string]struct {
		a, b, want ctrl.Result
	}{
		"none and none":   {a: none, b: none, want: none},
		"none then timed": {a: none, b: long, want: long},
		"timed then none": {a: short, b: none, want: short},
		"longer second":   {a: short, b: long, want: short},
		"shorter second":  {a: long, b: short, want: short},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Shortest(tc.a, tc.b); got != tc.want {
				t.Errorf("Shortest(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
