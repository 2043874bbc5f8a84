package manager

import (
	"testing"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// env is one kube-apiserver and etcd for the whole package; each test works
// in namespaces and names of its own.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, &env)
}
