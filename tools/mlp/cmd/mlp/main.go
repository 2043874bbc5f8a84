// Command mlp is the data scientist's tool for ml-platform: it submits and
// follows TrainingJobs, opens Notebooks and writes FeatureStore client
// configurations. Installed as kubectl-mlp it is also the kubectl plugin
// `kubectl mlp`.
package main

import (
	"os"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[1:]))
}
