// Package jupyter probes a Jupyter server's REST API for kernel and terminal
// activity without counting the probe itself as activity, and its Monitor
// runs those probes in the background, a few per namespace at a time.
package jupyter
