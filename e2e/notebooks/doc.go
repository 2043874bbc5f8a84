// Package notebooks is the Notebook suite of the platform's e2e tests
// (issue 15, suite 2), run by make e2e on the kind cluster of make
// quickstart: a Notebook becomes Ready and runs code in a real kernel
// through its Service with its token; with short timeouts it is warned,
// then culled while idle, keeps its workspace, and starts again by the
// documented user action; a busy kernel is never culled.
package notebooks
