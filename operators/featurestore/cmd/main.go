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
	manager.Main(controller.ManagerOptions(opts))
}
