// Package finalizer runs an operator's cleanup of external resources behind a
// finalizer: idempotent, visible when it fails, bounded by a deadline, and
// never the reason a namespace cannot be deleted.
package finalizer
