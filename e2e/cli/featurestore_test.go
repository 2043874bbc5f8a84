package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

func managed(memory string) *featuresv1alpha1.ManagedServer {
	return &featuresv1alpha1.ManagedServer{
		Storage: ptr.To(resource.MustParse("64Mi")),
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
		},
	}
}

// TestFeatureStoreConfigConnects: `mlp featurestore config` writes the
// store's feature_store.yaml to a file only its owner can read, and a
// client pod in the cluster given that file (as a Secret, the way a user
// ships it) and the store's binding label connects with it to the store's
// database and keys.
func TestFeatureStoreConfigConnects(t *testing.T) {
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-cli-store")
	fs := &featuresv1alpha1.FeatureStore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"},
		Spec: featuresv1alpha1.FeatureStoreSpec{
			Project:        "e2e_cli",
			OnlineStore:    featuresv1alpha1.StoreSource{Managed: managed("256Mi")},
			OfflineStore:   featuresv1alpha1.StoreSource{Managed: managed("512Mi")},
			Registry:       featuresv1alpha1.StoreSource{Managed: managed("512Mi")},
			DeletionPolicy: commonv1alpha1.DeletionPolicyDelete,
		},
	}
	if err := e.C.Create(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	e.WaitCondition(t, fs, "Ready", metav1.ConditionTrue, "Stalled", 15*time.Minute)

	file := filepath.Join(t.TempDir(), "feature_store.yaml")
	if out, code := mlp(t, time.Minute, ns, "featurestore", "config", "store", "--file", file); code != 0 {
		t.Fatalf("mlp featurestore config exited %d: %s", code, out)
	}
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600 (it holds passwords)", file, info.Mode().Perm())
	}
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-mlp"}, Data: map[string][]byte{"feature_store.yaml": content}}
	if err := e.C.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	pod := steps.ClientPod("feast-client", steps.Image(t, "pytorch"), `exec /usr/bin/python3 -c "$CLIENT"`)
	// A pod of the user's own reaches the managed servers only with the
	// store's binding label, which the store's NetworkPolicy admits.
	pod.Labels[commonv1alpha1.FeatureStoreBindingLabel(fs.Name)] = commonv1alpha1.FeatureStoreBindingLabelValue
	steps.SetEnv(pod, "CLIENT", steps.FeastClient)
	steps.SetEnv(pod, "WHO", "mlp")
	steps.SetEnv(pod, "FEAST_FS_YAML_FILE_PATH", "/etc/feast/feature_store.yaml")
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "feast", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name}}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "feast", MountPath: "/etc/feast", ReadOnly: true})
	out := e.MustRun(t, ns, pod)
	if want := "BOUND db=" + fs.Status.OfflineStore.Database + " redis=mlp"; !strings.Contains(out, want) {
		t.Errorf("the client with mlp's file: %q, want %q", out, want)
	}
}
