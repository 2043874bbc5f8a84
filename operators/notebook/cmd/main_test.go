package main

import (
	"testing"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// TestEveryProbeCanRunBesideTheOthers: every probe's answer brings its
// notebook back, so with fewer workers than probes the answers of one
// check would wait behind each other.
func TestEveryProbeCanRunBesideTheOthers(t *testing.T) {
	cfg := manager.DefaultConfig()
	defaults(&cfg)
	if probes := config.Default().Probe.Concurrency; cfg.MaxConcurrentReconciles < probes {
		t.Errorf("%d workers for %d probes at once", cfg.MaxConcurrentReconciles, probes)
	}
}
