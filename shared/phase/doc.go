// Package phase is the reconcile skeleton every ml-platform controller
// follows: after the object is read and the deletion and finalizer paths are
// handled, a Runner runs the controller's phases over one reconcile's scope
// in order, aggregates their errors, keeps the shortest requested requeue,
// stamps observedGeneration, writes status once through shared/patch, and
// only then records the reconcile's events (Runner.Events).
//
// A controller keeps its own Reconcile(ctx, req): reading the object,
// deleting it, ensuring its finalizer, and then Runner.Run with a new
// scope. It builds its Runner once, in SetupWithManager (after NewReconciler,
// so that what a caller tuned on the Reconciler is what the Runner uses),
// from steps adapted by Step, and registers itself with
//
//	func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error
//
// so a cmd/main.go wires all of them the same way.
package phase
