package version

import (
	"testing"

	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, clitest.Groups(NewCommand)) }
