package main

import (
	"testing"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// TestEveryProbeCanRunBesideTheOthers: a reconcile waits for its probe,
// so with fewer workers than probes a few servers that never answer would
// hold every worker, and every other notebook would wait behind them.
func TestEveryProbeCanRunBesideTheOthers(t *testing.T) {
	cfg := manager.DefaultConfig()
	defaults(&cfg)
	if probes := config.Default().Probe.Concurrency; cfg.MaxConcurrentReconciles < probes {
		t.Errorf("%d workers for %d probes at once", cfg.MaxConcurrentReconciles, probes)
	}
}
