package accelerator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

var catalog = Catalog{
	DefaultType: "t4",
	Classes: []Class{
		{Type: "t4", ResourceName: "nvidia.com/gpu", NodeSelector: map[string]string{"gpu": "t4"}},
		{Type: "a100", ResourceName: "nvidia.com/gpu", NodeSelector: map[string]string{"gpu": "a100", "tier": "hpc"},
			Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
	},
}

func TestResolve(t *testing.T) {
	cases := map[string]struct {
		acc      *commonv1alpha1.Accelerators
		wantType string
		wantErr  string
	}{
		"none":          {acc: nil},
		"zero count":    {acc: &commonv1alpha1.Accelerators{Count: 0, Type: "a100"}},
		"default type":  {acc: &commonv1alpha1.Accelerators{Count: 1}, wantType: "t4"},
		"explicit type": {acc: &commonv1alpha1.Accelerators{Count: 2, Type: "a100"}, wantType: "a100"},
		"unknown type":  {acc: &commonv1alpha1.Accelerators{Count: 1, Type: "h100"}, wantErr: `"h100" is not offered by this cluster (configured types: a100, t4)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := catalog.Resolve(tc.acc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotType := ""
			if got != nil {
				gotType = got.Type
			}
			if gotType != tc.wantType {
				t.Errorf("type = %q, want %q", gotType, tc.wantType)
			}
		})
	}
	if _, err := (Catalog{Classes: catalog.Classes}).Resolve(&commonv1alpha1.Accelerators{Count: 1}); err == nil {
		t.Error("a catalog without default must ask for a type")
	}
}

func TestApplyKeepsUserChoices(t *testing.T) {
	pod := &corev1.PodSpec{NodeSelector: map[string]string{"tier": "spot"}}
	c := &corev1.Container{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	Apply(&catalog.Classes[1], 2, pod, c)
	Apply(&catalog.Classes[1], 2, pod, c) // idempotent
	wantSel := map[string]string{"gpu": "a100", "tier": "spot"}
	if diff := cmp.Diff(wantSel, pod.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	if len(pod.Tolerations) != 1 {
		t.Errorf("tolerations = %v, want one", pod.Tolerations)
	}
	gpu := c.Resources.Limits["nvidia.com/gpu"]
	req := c.Resources.Requests["nvidia.com/gpu"]
	if gpu.Value() != 2 || req.Value() != 2 || c.Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("resources = %+v", c.Resources)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	_ = os.WriteFile(good, []byte("defaultType: a100\nclasses:\n- type: a100\n  resourceName: nvidia.com/gpu\n"), 0o600)
	c, err := Load(good)
	if err != nil || c.DefaultType != "a100" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	for name, body := range map[string]string{
		"unknown key":     "defaultType: a100\nclasses: []\nbogus: 1\n",
		"missing default": "defaultType: a100\nclasses:\n- type: t4\n  resourceName: nvidia.com/gpu\n",
		"duplicate":       "classes:\n- type: t4\n  resourceName: x\n- type: t4\n  resourceName: x\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		_ = os.WriteFile(p, []byte(body), 0o600)
		if _, err := Load(p); err == nil {
			t.Errorf("%s: Load accepted a bad catalog", name)
		}
	}
	if c, err := Load(""); err != nil || c.DefaultType != "gpu" {
		t.Errorf("Load(\"\") = %+v, %v; want the default catalog", c, err)
	}
}
