// Package e2e holds the end-to-end suites that run the real charts and
// workloads on a kind cluster (the nightly pipeline). Their cluster tests
// need a cluster from `make kind-up` and run only with ML_PLATFORM_E2E=1
// (the make e2e-* targets); what needs no cluster, such as rendering the
// umbrella chart with the kind values and decoding the samples, runs in
// `make test` too.
package e2e
