// Package drift finds where a live object no longer carries a field the
// operator sets, so that the operator rewrites its children only for
// changes to its own fields and leaves everybody else's alone.
package drift
