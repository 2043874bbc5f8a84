package featurestore

// RebuildRunner builds the reconciler's Runner again, for the tests of
// package featurestore_test that tune the reconciler after NewReconciler:
// the Runner holds the client, clock and recorder it was built with.
func (r *Reconciler) RebuildRunner() { r.runner = r.newRunner() }
