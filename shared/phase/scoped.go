package phase

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Scoped adapts a step that works on what one reconcile's phases share
// (its scope s) and answers with a controller-runtime result, to a Phase:
// the reconcilers whose phases pass findings along use it instead of each
// writing the same adapter. The step's RequeueAfter and error reach the
// Runner unchanged.
func Scoped[T Object, S any](name string, run func(context.Context, S) (ctrl.Result, error), s S) Phase[T] {
	return Phase[T]{Name: name, Run: func(ctx context.Context, _ T) (Result, error) {
		res, err := run(ctx, s)
		return Result{RequeueAfter: res.RequeueAfter}, err
	}}
}
