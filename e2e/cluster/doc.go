// Package cluster connects e2e suites to the cluster under test and tells
// them what it provides: the client from KUBECONFIG, the busybox image
// preloaded for test pods, and whether NetworkPolicy is enforced. Its tests
// are the infrastructure smoke test of the offline kind cluster
// (make kind-up, then make e2e-smoke-cluster).
package cluster
