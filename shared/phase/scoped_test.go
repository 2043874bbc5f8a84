package phase

import (
	"context"
	"errors"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// TestScopedPassesTheScopeResultAndError: steps adapted by Scoped share one
// scope, and their requeue and error reach the Runner unchanged.
func TestScopedPassesTheScopeResultAndError(t *testing.T) {
	type scope struct{ seen []string }
	s := &scope{}
	boom := errors.New("boom")
	first := Scoped[W]("first", func(_ context.Context, s *scope) (ctrl.Result, error) {
		s.seen = append(s.seen, "first")
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}, s)
	second := Scoped[W]("second", func(_ context.Context, s *scope) (ctrl.Result, error) {
		s.seen = append(s.seen, "second")
		return ctrl.Result{}, boom
	}, s)
	if first.Name != "first" || second.Name != "second" {
		t.Errorf("names %q, %q", first.Name, second.Name)
	}
	res, err := first.Run(context.Background(), nil)
	if err != nil || res.RequeueAfter != time.Minute {
		t.Errorf("first = %+v, %v; want a 1m requeue and no error", res, err)
	}
	if _, err := second.Run(context.Background(), nil); !errors.Is(err, boom) {
		t.Errorf("second's error = %v, want boom", err)
	}
	if len(s.seen) != 2 || s.seen[0] != "first" || s.seen[1] != "second" {
		t.Errorf("the steps saw the scope as %v", s.seen)
	}
}
