// Package jupyter probes a Jupyter server's REST API for kernel and terminal
// activity without counting the probe itself as activity.
package jupyter
