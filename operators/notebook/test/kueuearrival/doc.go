// Package kueuearrival tests a Notebook operator started before Kueue: it
// picks Kueue's Workloads up when their CRD appears, without a restart.
package kueuearrival
