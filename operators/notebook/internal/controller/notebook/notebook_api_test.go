package notebook

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func TestAPIDefaults(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	nb := newNotebook(ns, "defaults")
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	ws := nb.Spec.Workspace
	if ws.Size.String() != "10Gi" || ws.MountPath != "/home/jovyan" || ws.DeletionPolicy != commonv1alpha1.DeletionPolicyRetain {
		t.Errorf("workspace defaults = %+v, want 10Gi at /home/jovyan, Retain", ws)
	}
}

func TestAPIValidation(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	for name, tc := range map[string]struct {
		mutate  func(*notebooksv1alpha1.Notebook)
		wantErr string // empty: accepted
	}{
		"minimal is valid": {mutate: func(*notebooksv1alpha1.Notebook) {}},
		"a mount of a declared volume": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				nb.Spec.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			},
		},
		"a mount over the workspace": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				nb.Spec.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/home/jovyan"}}
			},
			wantErr: "volumeMounts may not use the workspace mountPath or /tmp",
		},
		"a reserved volume name": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Volumes = []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			},
			wantErr: "volume names workspace, tmp and featurestore-* are reserved",
		},
		"setting the token variable": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Env = []corev1.EnvVar{{Name: "JUPYTER_TOKEN", Value: "x"}}
			},
			wantErr: "env may not set JUPYTER_TOKEN",
		},
		"an idle timeout too short": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Culling.IdleTimeout = dur(time.Minute) },
			wantErr: "culling.idleTimeout must be at least 5m",
		},
		"a check period too short": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Culling.CheckPeriod = dur(time.Second) },
			wantErr: "culling.checkPeriod must be between 10s and 1h",
		},
		"a lifetime too short": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Culling.MaxLifetime = dur(time.Minute) },
			wantErr: "culling.maxLifetime must be at least 10m",
		},
		"a tiny workspace": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.Size = ptr.To(resource.MustParse("1Ki")) },
			wantErr: "workspace.size must be at least 1Mi",
		},
		"a relative mount path": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.MountPath = "home" },
			wantErr: "workspace.mountPath must be an absolute path",
		},
		"an unknown deletion policy": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.DeletionPolicy = "Keep" },
			wantErr: "Unsupported value",
		},
		"an accelerator type without a count": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Resources.Accelerators = &commonv1alpha1.Accelerators{Type: "a100"}
			},
			wantErr: "accelerators.type needs accelerators.count greater than 0",
		},
		"a bad queue name": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.QueueName = "Not_A_Label" },
			wantErr: "spec.queueName",
		},
		"a name with a dot, which a Service cannot take": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Name = "v-dotted.name" },
			wantErr: "Notebook names are DNS-1035 labels",
		},
		"a name starting with a digit": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Name = "1st" },
			wantErr: "Notebook names are DNS-1035 labels",
		},
		"requests above limits": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourceCPU: resource.MustParse("1")}
				nb.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
			},
			wantErr: "resources.requests of cpu, memory and ephemeral-storage may not exceed their limits",
		},
		"requests equal to limits, in other units": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
				nb.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}
			},
		},
		"a negative request": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}
			},
			wantErr: "resources.requests of cpu, memory and ephemeral-storage may not be negative",
		},
		"a negative limit": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Gi")}
			},
			wantErr: "resources.limits of cpu, memory and ephemeral-storage may not be negative",
		},
		"a FeatureStore reference as long as a FeatureStore name": {
			mutate: func(nb *notebooksv1alpha1.Notebook) { nb.Spec.FeatureStores = storeRefs(strings.Repeat("s", 63)) },
		},
		"a FeatureStore reference longer than any FeatureStore name": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.FeatureStores = storeRefs(strings.Repeat("s", 64)) },
			wantErr: "a FeatureStore name is at most 63 characters",
		},
		"a name too long for its children": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Name = strings.Repeat("n", 53) },
			wantErr: "Notebook names are at most 52 characters",
		},
	} {
		t.Run(name, func(t *testing.T) {
			nb := newNotebook(ns, "")
			nb.GenerateName = ""
			nb.Name = "v-" + strings.ToLower(strings.NewReplacer(" ", "-").Replace(name))
			if len(nb.Name) > 50 {
				nb.Name = nb.Name[:50]
			}
			nb.Name = strings.TrimRight(strings.ReplaceAll(nb.Name, ",", ""), "-")
			tc.mutate(nb)
			err := c.Create(t.Context(), nb, client.DryRunAll)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func storeRefs(names ...string) []commonv1alpha1.FeatureStoreReference {
	refs := make([]commonv1alpha1.FeatureStoreReference, 0, len(names))
	for _, n := range names {
		refs = append(refs, commonv1alpha1.FeatureStoreReference{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: n}})
	}
	return refs
}

func TestAPITransitions(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	nb := newNotebook(ns, "transitions")
	nb.Spec.Workspace.Size = ptr.To(resource.MustParse("20Gi"))
	nb.Spec.Workspace.StorageClassName = ptr.To("fast")
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		mutate  func(*notebooksv1alpha1.Notebook)
		wantErr string
	}{
		"growing the workspace": {mutate: func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.Size = ptr.To(resource.MustParse("30Gi")) }},
		"shrinking the workspace": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.Size = ptr.To(resource.MustParse("5Gi")) },
			wantErr: "spec.workspace.size cannot shrink below the workspace claim's size",
		},
		"changing the storage class": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.StorageClassName = ptr.To("slow") },
			wantErr: "workspace.storageClassName is immutable",
		},
		"removing the storage class": {
			mutate:  func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.StorageClassName = nil },
			wantErr: "workspace.storageClassName cannot be added or removed",
		},
		"suspending": {mutate: func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = true }},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := getNotebook(t.Context(), c, nb)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(got)
			err = c.Update(t.Context(), got, client.DryRunAll)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// A growth the cluster cannot do can be taken back to the claim's size the
// status records, never below it.
func TestAPIWorkspaceShrinksBackToTheClaimOnly(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	nb := newNotebook(ns, "shrink-back")
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	nb.Status.Workspace = &notebooksv1alpha1.WorkspaceStatus{Size: ptr.To(resource.MustParse("10Gi"))}
	if err := c.Status().Update(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	nb = updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.Size = ptr.To(resource.MustParse("30Gi")) })
	for size, wantErr := range map[string]string{
		"10Gi":    "",
		"20Gi":    "",
		"10240Mi": "",
		"9Gi":     "spec.workspace.size cannot shrink below the workspace claim's size",
	} {
		got := nb.DeepCopy()
		got.Spec.Workspace.Size = ptr.To(resource.MustParse(size))
		err := c.Update(t.Context(), got, client.DryRunAll)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%s refused: %v", size, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%s: got %v, want an error containing %q", size, err, wantErr)
		}
	}
}
