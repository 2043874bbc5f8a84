package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// trainingJobCRD is the TrainingJob CRD the chart installs, under charts/.
const trainingJobCRD = "trainingjob-operator/files/crds/training.mlplatform.dev_trainingjobs.yaml"

// TestListColumnsAreTheCRDPrinterColumns: the tables of list, default and
// wide, have the printer columns of the CRD that the charts install, in
// their order, so mlp and kubectl get show the same table.
func TestListColumnsAreTheCRDPrinterColumns(t *testing.T) {
	ns := clitest.NewNamespace(t)
	fs := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}}
	fs.Spec.Project = "shop"
	fs.Spec.OnlineStore.Managed = &featuresv1alpha1.ManagedServer{}
	fs.Spec.OfflineStore.Managed = &featuresv1alpha1.ManagedServer{}
	fs.Spec.Registry.Managed = &featuresv1alpha1.ManagedServer{}
	clitest.CreateAll(t, clitest.TrainingJob(ns, "bert", 1), clitest.Notebook(ns, "alice"), fs)
	for _, tc := range []struct{ group, crd string }{
		{"train", trainingJobCRD},
		{"notebook", "notebook-operator/files/crds/notebooks.mlplatform.dev_notebooks.yaml"},
		{"featurestore", "featurestore-operator/files/crds/features.mlplatform.dev_featurestores.yaml"},
	} {
		cols := printerColumns(t, filepath.Join(testenv.RepoRoot(), "charts", tc.crd))
		for _, wide := range []bool{false, true} {
			args := []string{tc.group, "list"}
			if wide {
				args = append(args, "-o", "wide")
			}
			r := clitest.Run(t, ns, args...)
			if r.Code != 0 {
				t.Fatalf("%v: exit %d, stderr %q", args, r.Code, r.Err)
			}
			if diff := cmp.Diff(headers(cols, wide), headerOf(r.Out)); diff != "" {
				t.Errorf("%v: the header is not the CRD's printer columns (-crd +mlp):\n%s", args, diff)
			}
		}
	}
}

// printerColumns are the additionalPrinterColumns of the served version
// of the CRD in file.
func printerColumns(t *testing.T, file string) []apiextensionsv1.CustomResourceColumnDefinition {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Served && v.Storage {
			return v.AdditionalPrinterColumns
		}
	}
	t.Fatalf("%s has no served storage version", file)
	return nil
}

// headers is what kubectl get prints as the header of cols: NAME, then
// the columns of priority 0, and with -o wide every column.
func headers(cols []apiextensionsv1.CustomResourceColumnDefinition, wide bool) []string {
	h := []string{"NAME"}
	for _, c := range cols {
		if wide || c.Priority == 0 {
			h = append(h, strings.ToUpper(c.Name))
		}
	}
	return h
}

// headerOf splits the first line of a printed table into column names,
// which the table printer separates by at least three spaces.
func headerOf(out string) []string {
	first, _, _ := strings.Cut(out, "\n")
	return regexp.MustCompile(` {3,}`).Split(first, -1)
}
