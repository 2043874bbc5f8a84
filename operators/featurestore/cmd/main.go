// Command featurestore-operator reconciles FeatureStores and
// FeatureStoreBackends (features.mlplatform.dev).
package main

import (
	"flag"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller"
	"github.com/ml-platform/ml-platform/shared/manager"
)

func main() {
	opts := &controller.Options{}
	opts.BindFlags(flag.CommandLine)
	mopts := controller.ManagerOptions(opts)
	// A reconcile mostly waits for database servers, up to the
	// provisioners' bounds (postgres.OperationTimeout and
	// redis.OperationTimeout) when one is slow or a tenant holds a lock
	// the operator needs. With the shared default of one worker, every
	// other FeatureStore would wait that long too; with 8, up to 7 stores
	// may wait at once and the others still proceed. Each worker holds at
	// most one admin connection to one server at a time, so 8 stay well
	// within a shared PostgreSQL's connection limit.
	mopts.Defaults = func(c *manager.Config) { c.MaxConcurrentReconciles = 8 }
	manager.Main(mopts)
}
