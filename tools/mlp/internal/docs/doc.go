// Package docs holds the tests that keep the repository's documentation
// true: every mlp command line in the docs parses against the real command
// tree, the troubleshooting guide has a section for every shared condition
// reason, and docs/architecture.md's picture is the one the charts and CRDs
// describe (regenerate it with `make docs`).
package docs
