package manager

import (
	"path/filepath"
	"testing"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// env is one kube-apiserver and etcd for the whole package; each test works
// in namespaces and names of its own.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{
		// The sample kind is one of an operator's own, for the metrics that
		// count them.
		CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "shared", "internal", "sample", "crd")},
	}, &env)
}
