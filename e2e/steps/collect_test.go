package steps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// secretValue is a Secret's data in the collector's test: it must reach
// no file.
const secretValue = "s3cr3t-never-in-an-artifact"

func trainingJob(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("training.mlplatform.dev/v1alpha1")
	u.SetKind("TrainingJob")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func newCollector(t *testing.T) Collector {
	t.Helper()
	cs := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "worker"}, Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "wait"}}, Containers: []corev1.Container{{Name: "pytorch"}},
		}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "e1"}, Reason: "BackOff", Type: "Warning",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "worker"}, Message: "back-off restarting"},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "token"}, Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"token": []byte(secretValue)}, StringData: map[string]string{"plain": secretValue}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mlp-system", Name: "sh.helm.release.v1.mlp.v2",
			Labels: map[string]string{"owner": "helm", "name": "mlp", "version": "2", "status": "deployed"}},
			Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte(secretValue)}},
	)
	cs.Resources = []*metav1.APIResourceList{
		{GroupVersion: "training.mlplatform.dev/v1alpha1", APIResources: []metav1.APIResource{
			{Name: "trainingjobs", Namespaced: true, Kind: "TrainingJob"}, {Name: "trainingjobs/status", Namespaced: true},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Namespaced: true}}},
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName("trainingjobs.training.mlplatform.dev")
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("team")
	cm.SetName("settings")
	listKinds := map[schema.GroupVersionResource]string{
		{Group: "training.mlplatform.dev", Version: "v1alpha1", Resource: "trainingjobs"}: "TrainingJobList",
		crdResource: "CustomResourceDefinitionList",
	}
	for _, gvr := range workloadResources {
		listKinds[gvr] = "List"
	}
	d := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, trainingJob("team", "resnet"), crd, cm)
	return Collector{CS: cs, Dynamic: d}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCollectorClusterSavesTheStateAndNoSecretData(t *testing.T) {
	dir := t.TempDir()
	if err := newCollector(t).Cluster(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"nodes.yaml":                              {"name: node-1"},
		"crds.txt":                                {"trainingjobs.training.mlplatform.dev"},
		"events.txt":                              {"BackOff", "pod/worker", "back-off restarting"},
		"secrets.txt":                             {"team", "token", "Opaque"},
		"helm.txt":                                {"mlp-system", "mlp", "2", "deployed"},
		"namespaces/team/objects.yaml":            {"kind: TrainingJob", "name: resnet", "kind: ConfigMap", "name: settings"},
		"namespaces/team/events.txt":              {"BackOff"},
		"namespaces/team/logs/worker.wait.log":    {"fake logs"},
		"namespaces/team/logs/worker.pytorch.log": {"fake logs"},
	}
	for file, parts := range want {
		got := readFile(t, filepath.Join(dir, file))
		for _, part := range parts {
			if !strings.Contains(got, part) {
				t.Errorf("%s lacks %q:\n%s", file, part, got)
			}
		}
	}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if strings.Contains(readFile(t, path), secretValue) {
			t.Errorf("%s holds a Secret's data", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
