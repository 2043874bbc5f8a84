// Package charttest lints, renders and installs the repository's Helm charts
// with the Helm SDK, and impersonates their ServiceAccounts, so chart tests
// run against the real test API server.
package charttest
