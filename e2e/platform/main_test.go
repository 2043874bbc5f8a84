package platform

import (
	"path/filepath"
	"testing"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

var env *testenv.Env

// crdDirs are our CRDs, as the charts install them, and the CRDs of
// Kubeflow Notebooks and the Feast operator, whose resource names clash
// with ours.
var crdDirs = []string{
	filepath.Join(repoRoot, "charts", "trainingjob-operator", "files", "crds"),
	filepath.Join(repoRoot, "charts", "notebook-operator", "files", "crds"),
	filepath.Join(repoRoot, "charts", "featurestore-operator", "files", "crds"),
	"testdata",
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: crdDirs}, &env)
}
