// Package patch persists what a reconcile changed on an object, metadata and
// status separately, only when something changed, without ever dropping a
// finalizer, label, annotation or condition that another writer added.
package patch
