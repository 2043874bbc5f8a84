// Package uninstall is the Uninstall suite of the platform's e2e tests
// (issue 15, suite 6): delete every custom resource, then uninstall the
// release; nothing is left (no stuck finalizer, no orphaned PVC, Secret or
// workload) apart from what a Retain policy kept. It removes the platform
// from the cluster, so it runs only with ML_PLATFORM_E2E_UNINSTALL=1 as well,
// which make e2e sets for this suite alone, after every other suite.
package uninstall
