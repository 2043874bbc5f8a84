// Package render builds the objects a Notebook owns (StatefulSet, Service,
// token Secret, workspace claim, NetworkPolicy, Ingress) as pure functions
// of the Notebook and the platform configuration.
package render
