// Package notebook reconciles Notebooks into a Jupyter StatefulSet with its
// Service, token Secret, workspace claim and NetworkPolicy, and culls idle
// notebooks.
package notebook
