package quickstart

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Paths of what the quickstart installs, relative to this package's
// directory (go test runs there).
const (
	RepoRoot   = "../.."
	ChartDir   = RepoRoot + "/charts/ml-platform"
	KindValues = ChartDir + "/values-kind.yaml"
	SamplesDir = RepoRoot + "/deploy/samples"
)

// Release and Namespace are those of hack/quickstart/quickstart.sh.
const (
	Release   = "ml-platform"
	Namespace = "mlp-system"
)

// Operators are the operator charts the umbrella installs, as its values
// name them.
var Operators = []string{"trainingjob-operator", "notebook-operator", "featurestore-operator"}

// BusyboxPrefix is the name, without its tag, of the busybox image built
// with the kind node image (hack/kind/images.sh). Its tag is the version of
// Debian's busybox-static at build time, so only the cluster knows it.
const BusyboxPrefix = "localhost/ml-platform/kind/busybox:"

// LoadValues reads a values file as Helm does.
func LoadValues(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return values, nil
}

// LocalImages lists the images `make load-images` puts on the kind node, as
// hack/images/build.sh names them: the operators under their charts' image
// repository and appVersion, the training-operator, Kueue, and the Debian images
// of images/ under their recipe's tag. The busybox of the node image is not
// in it (see BusyboxPrefix).
func LocalImages() ([]string, error) {
	images := []string{"localhost/ml-platform/kubeflow-training-operator:v1.8.1", "localhost/ml-platform/kueue:v0.17.0"}
	for _, op := range Operators {
		chart := filepath.Join(RepoRoot, "charts", op)
		var meta struct {
			AppVersion string `json:"appVersion"`
		}
		b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(b, &meta); err != nil {
			return nil, fmt.Errorf("%s/Chart.yaml: %w", chart, err)
		}
		values, err := LoadValues(filepath.Join(chart, "values.yaml"))
		if err != nil {
			return nil, err
		}
		image, _ := values["image"].(map[string]any)
		repository, _ := image["repository"].(string)
		if repository == "" || meta.AppVersion == "" {
			return nil, fmt.Errorf("%s: no image.repository or appVersion", chart)
		}
		images = append(images, repository+":"+meta.AppVersion)
	}
	recipes, err := filepath.Glob(filepath.Join(RepoRoot, "images", "*", "tag"))
	if err != nil {
		return nil, err
	}
	if len(recipes) == 0 {
		return nil, fmt.Errorf("no image recipes in %s/images", RepoRoot)
	}
	for _, tagFile := range recipes {
		tag, err := os.ReadFile(tagFile)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(filepath.Dir(tagFile))
		images = append(images, "localhost/ml-platform/"+name+":"+strings.TrimSpace(string(tag)))
	}
	return images, nil
}
