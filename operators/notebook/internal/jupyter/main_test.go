package jupyter

import (
	"fmt"
	"os"
	"testing"

	"github.com/ml-platform/ml-platform/operators/notebook/test/jupytertest"
)

// server is one real Jupyter server shared by the tests of this package,
// started once per test run.
var server *jupytertest.Server

func TestMain(m *testing.M) {
	var err error
	server, err = jupytertest.Start("/notebook/team/nb/")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	server.Stop()
	os.Exit(code)
}
