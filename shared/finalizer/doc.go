// Package finalizer runs an operator's cleanup of external resources behind a
// finalizer: idempotent, visible when it fails, bounded by a deadline, and
// never the reason a namespace cannot be deleted.
//
// The contract of a CleanupFunc is the heart of the package: only nil means
// done. A cleanup returns nil when the external resource it removes is gone,
// whether it removed it now or found it already absent; it decides that
// itself, at the call that looked for the resource (client.IgnoreNotFound on
// the delete of that very resource, a "does not exist" answer from the
// database server). Everything else is a failure that keeps the finalizer,
// including a Kubernetes NotFound error: the object that was not found is
// almost always something the cleanup needed (an admin Secret, a backend
// object), not the resource it removes, and releasing the finalizer then
// would leave the resource behind with nobody to remove it. Wrap such
// errors with MissingDependency, which gives the CleanupFailed condition the
// reason CleanupDependencyMissing so a person sees what to restore; the
// usual retry with backoff, the deadline (Stalled) and the abandon and
// namespace hand-off paths apply.
package finalizer
