// Package accelerator maps the accelerator types users request to the
// extended resource names, node labels and tolerations that the platform
// team configured for their cluster.
package accelerator
