package quickstart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// sampleKinds are the kinds deploy/samples holds one sample of, with a
// function that decodes a sample strictly into its Go type and returns the
// images it names.
var sampleKinds = map[schema.GroupVersionKind]func(b []byte) ([]string, error){
	featuresv1alpha1.GroupVersion.WithKind("FeatureStore"): func(b []byte) ([]string, error) {
		var fs featuresv1alpha1.FeatureStore
		return nil, yaml.UnmarshalStrict(b, &fs)
	},
	notebooksv1alpha1.GroupVersion.WithKind("Notebook"): func(b []byte) ([]string, error) {
		var nb notebooksv1alpha1.Notebook
		err := yaml.UnmarshalStrict(b, &nb)
		return []string{nb.Spec.Image}, err
	},
	trainingv1alpha1.GroupVersion.WithKind("TrainingJob"): func(b []byte) ([]string, error) {
		var tj trainingv1alpha1.TrainingJob
		err := yaml.UnmarshalStrict(b, &tj)
		return []string{tj.Spec.Image}, err
	},
}

// Sample is one object of deploy/samples.
type Sample struct {
	File string
	GVK  schema.GroupVersionKind
	Name string
	YAML []byte
}

// Samples reads every object of deploy/samples: one per .yaml file.
func Samples() ([]Sample, error) {
	files, err := filepath.Glob(filepath.Join(SamplesDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var head struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(b, &head); err != nil {
			return nil, err
		}
		out = append(out, Sample{File: filepath.Base(f), GVK: head.GroupVersionKind(), Name: head.Metadata.Name, YAML: b})
	}
	return out, nil
}

func TestSamplesDecodeStrictly(t *testing.T) {
	samples, err := Samples()
	if err != nil {
		t.Fatal(err)
	}
	local, err := LocalImages()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, s := range samples {
		t.Run(s.File, func(t *testing.T) {
			if strings.Contains(string(s.YAML), "\n---") {
				t.Fatal("one object per sample file: the e2e test applies them one by one")
			}
			decode, ok := sampleKinds[s.GVK]
			if !ok {
				t.Fatalf("%v is not a kind of the platform", s.GVK)
			}
			seen[s.GVK] = true
			images, err := decode(s.YAML)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name == "" {
				t.Error("no metadata.name")
			}
			for _, image := range images {
				if !slices.Contains(local, image) {
					t.Errorf("image %q is not one of the locally built images %v", image, local)
				}
			}
		})
	}
	var missing []string
	for gvk := range sampleKinds {
		if !seen[gvk] {
			missing = append(missing, gvk.Kind)
		}
	}
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("kinds without a sample (-want +got):\n%s", diff)
	}
}
