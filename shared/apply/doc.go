// Package apply is the one way operators write the objects they own:
// server-side apply under the operator's field manager, only when a field
// the operator sets has drifted, never over an object that is not theirs.
package apply
