// Package cmd is the root of the mlp command tree. As in kubectl's
// pkg/cmd, each command group is a package of its own (train, notebook,
// featurestore, version) built on the shared util, resource, kube, output,
// watch and follow packages; no group imports another.
package cmd
