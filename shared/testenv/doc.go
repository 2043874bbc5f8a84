// Package testenv runs a real kube-apiserver and etcd (and optionally a
// kube-controller-manager) built from Go modules, for integration tests.
package testenv
