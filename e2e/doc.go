// Package e2e holds the end-to-end suites that run the real charts and
// workloads on a kind cluster (the nightly pipeline). They need a cluster
// from `make kind-up` and are not part of `make test`.
package e2e
