// Package patch reads and persists a reconcile's own object: Get starts a
// reconcile from a version no older than this process's last write of it,
// and Helper writes what the reconcile changed, metadata and status
// separately, only when something changed, without ever dropping a
// finalizer, label, annotation or condition that another writer added.
package patch
