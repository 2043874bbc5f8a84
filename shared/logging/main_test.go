package logging_test

import (
	"testing"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, &env)
}
