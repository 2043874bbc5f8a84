package images

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ml-platform/ml-platform/e2e/cluster"
)

var appVersion = regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?\s*$`)

// operatorImages are the images hack/images/build.sh makes for the
// operators in this repository (the charts' repository and appVersion), the
// Kubeflow training-operator and Kueue's controller manager.
func operatorImages(t *testing.T) map[string]string {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join("..", "..", "operators", "*", "cmd", "main.go"))
	if err != nil || len(mains) == 0 {
		t.Fatalf("no operators found: %v", err)
	}
	images := map[string]string{
		"kubeflow-training-operator": "localhost/ml-platform/kubeflow-training-operator:v1.8.1",
		"kueue":                      "localhost/ml-platform/kueue:v0.17.0",
	}
	for _, m := range mains {
		op := filepath.Base(filepath.Dir(filepath.Dir(m)))
		chart, err := os.ReadFile(filepath.Join("..", "..", "charts", op+"-operator", "Chart.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		v := appVersion.FindSubmatch(chart)
		if v == nil {
			t.Fatalf("charts/%s-operator/Chart.yaml has no appVersion", op)
		}
		images[op+"-operator"] = "ml-platform/" + op + "-operator:" + string(v[1])
	}
	return images
}

// TestOperatorImagesRunRestrictedReadOnly starts every operator binary
// from its preloaded image as uid 65532 with a read-only root filesystem
// under the restricted profile; --help proves the binary runs there.
func TestOperatorImagesRunRestrictedReadOnly(t *testing.T) {
	cs := cluster.Client(t)
	ns := restrictedNamespace(t, cs)
	images := operatorImages(t)
	for name, img := range images {
		createPod(t, cs, ns, restrictedPod(name, img, 65532, 65532, "--help"))
	}
	for name, img := range images {
		_, logs := waitFinished(t, cs, ns, name)
		// Go's flag package prints the usage for --help; the exit code
		// differs between the operators' flag sets, the usage does not.
		// Kueue's binary links Ginkgo, whose usage replaces that header;
		// controller-runtime's -kubeconfig flag follows it.
		if !strings.Contains(logs, "Usage of /manager") && !strings.Contains(logs, "-kubeconfig string") {
			t.Errorf("%s (%s): no usage in its output:\n%s", name, img, logs)
		}
	}
}
