package featureref

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestVolumeNameIsAValidUniqueLabel(t *testing.T) {
	long := strings.Repeat("a", 60)
	names := map[string]string{}
	for _, store := range []string{"sales", "presales", "a.b", "a-b", long, long + "b"} {
		v := VolumeName(store)
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			t.Errorf("VolumeName(%q) = %q: %v", store, v, errs)
		}
		if other, dup := names[v]; dup {
			t.Errorf("stores %q and %q share volume %q", other, store, v)
		}
		names[v] = store
	}
}

func TestMountIsDeterministicAndSkipsOtherContainers(t *testing.T) {
	build := func() *corev1.PodSpec {
		pod := &corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main", Env: []corev1.EnvVar{{Name: "FEAST_FS_YAML_FILE_PATH", Value: "/user/choice.yaml"}}},
			{Name: "sidecar"},
		}}
		Mount(pod, []string{"main"}, []Store{{Name: "sales", SecretName: "sales-feast", Key: "feature_store.yaml"}, {Name: "ads", SecretName: "ads-feast", Key: "k"}})
		return pod
	}
	a, b := build(), build()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("Mount is not deterministic:\n%s", diff)
	}
	main := a.Containers[0]
	if len(a.Volumes) != 2 || len(main.VolumeMounts) != 2 || len(a.Containers[1].VolumeMounts) != 0 {
		t.Fatalf("volumes %v mounts %v", a.Volumes, main.VolumeMounts)
	}
	for _, m := range main.VolumeMounts {
		if !m.ReadOnly || m.SubPath != "" {
			t.Errorf("mount %+v must be read-only without subPath", m)
		}
	}
	if main.Env[0].Value != "/user/choice.yaml" {
		t.Errorf("the user's own FEAST_FS_YAML_FILE_PATH was overridden: %v", main.Env)
	}
	if got := main.Env[1]; got.Name != "MLPLATFORM_FEATURE_STORES_DIR" {
		t.Errorf("env = %v", main.Env)
	}
	if a.Volumes[0].Secret.Items[0].Path != "feature_store.yaml" || a.Volumes[1].Secret.Items[0].Key != "k" {
		t.Errorf("secret items = %+v", a.Volumes)
	}
}
