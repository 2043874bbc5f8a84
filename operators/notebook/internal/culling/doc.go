// Package culling decides, without any I/O, whether a notebook is warned,
// culled or left alone, from its probed activity and an injected time.
package culling
