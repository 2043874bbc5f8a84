// Package jupytertest runs a real Jupyter server (Debian's jupyter-server)
// on loopback for tests, and drives kernels and terminals on it to produce
// activity.
package jupytertest
