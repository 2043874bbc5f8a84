// Package kueue reads what Kueue says about a queued workload, for the
// operators whose children Kueue admits; Workloads are Kueue's, so it
// only reads them.
package kueue
