// Package cli implements the mlp commands on top of cobra and
// k8s.io/cli-runtime, addressing ml-platform's API groups explicitly.
package cli
