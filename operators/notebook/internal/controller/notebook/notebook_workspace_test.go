package notebook

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// A resize the cluster cannot do is reported and never blocks the rest of
// the Notebook: suspending it still stops the server. The API server
// refuses the two ways a cluster without volume expansion does: an unbound
// claim (WaitForFirstConsumer while the Notebook is queued or suspended)
// keeps its spec, and a bound claim of a class without
// allowVolumeExpansion is refused by the PersistentVolumeClaimResize
// admission plugin.
func TestGrowingWorkspaceDoesNotBlockSuspend(t *testing.T) {
	c := env.AdminClient(t, scheme)
	op := startOperator(t, operatorOptions{})
	for name, tc := range map[string]struct {
		// fixedSizeVolume: the claim is of a class without volume
		// expansion, and a volume is bound to it; else it is of the
		// cluster's default class and unbound.
		fixedSizeVolume bool
		wantReason      string
	}{
		"an unbound claim waits for its volume": {wantReason: notebooksv1alpha1.ReasonWorkspaceNotBound},
		"a bound claim of a class without expansion is refused": {
			fixedSizeVolume: true,
			wantReason:      notebooksv1alpha1.ReasonWorkspaceResizeRefused,
		},
	} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.CreateNamespace(t, c, "nb")
			nb := newNotebook(ns, "grow")
			if tc.fixedSizeVolume {
				nb.Spec.Workspace.StorageClassName = ptr.To(storageClass(t, c, false))
			}
			nb = runningNotebook(t, c, op, nb, t0)
			if tc.fixedSizeVolume {
				bindClaim(t, c, nb, resource.MustParse("10Gi"))
			}

			updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.Size = ptr.To(resource.MustParse("20Gi")) })
			got := waitNotebook(t, c, nb, "the resize reported pending", func(nb *notebooksv1alpha1.Notebook) bool {
				p := conditions.Get(nb, notebooksv1alpha1.ConditionWorkspaceResizePending)
				return p != nil && p.Status == metav1.ConditionTrue && p.Reason == tc.wantReason
			})
			if ws := got.Status.Workspace; ws == nil || ws.Size == nil || ws.Size.String() != "10Gi" {
				t.Errorf("status.workspace = %+v, want the claim's 10Gi", ws)
			}
			if conditions.IsTrue(got, commonv1alpha1.ConditionStalled) {
				t.Errorf("a pending resize stalled the Notebook: %+v", got.Status.Conditions)
			}

			updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = true })
			testenv.Eventually(t, "the StatefulSet scaled to 0", func(ctx context.Context) (bool, error) {
				sts, err := getStatefulSet(ctx, c, nb)
				return err == nil && *sts.Spec.Replicas == 0, err
			})
			got = waitNotebook(t, c, nb, "Suspended with the resize still pending", func(nb *notebooksv1alpha1.Notebook) bool {
				return nb.Status.Phase == notebooksv1alpha1.PhaseSuspended &&
					conditions.Get(nb, notebooksv1alpha1.ConditionWorkspaceResizePending).Reason == tc.wantReason
			})
			if tc.wantReason == notebooksv1alpha1.ReasonWorkspaceResizeRefused {
				msg := conditions.Get(got, notebooksv1alpha1.ConditionWorkspaceResizePending).Message
				if !strings.Contains(msg, "20Gi") || !strings.Contains(msg, "storageclass") {
					t.Errorf("the refusal does not give the sizes and the API server's words: %q", msg)
				}
				testenv.WaitForEvent(t, c, got, notebooksv1alpha1.ReasonWorkspaceResizeRefused)
			}

			// Going back to the claim's size is allowed, and ends the
			// pending resize.
			updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.Size = ptr.To(resource.MustParse("10Gi")) })
			waitNotebook(t, c, nb, "no resize pending at the claim's size", func(nb *notebooksv1alpha1.Notebook) bool {
				return conditions.Get(nb, notebooksv1alpha1.ConditionWorkspaceResizePending) == nil
			})
		})
	}
}

// Where the cluster can grow the volume, the bound claim grows to the new
// size and nothing is pending.
func TestGrowingWorkspaceOfAnExpandableClass(t *testing.T) {
	c := env.AdminClient(t, scheme)
	op := startOperator(t, operatorOptions{})
	ns := testenv.CreateNamespace(t, c, "nb")
	nb := newNotebook(ns, "grow")
	nb.Spec.Workspace.StorageClassName = ptr.To(storageClass(t, c, true))
	nb = runningNotebook(t, c, op, nb, t0)
	bindClaim(t, c, nb, resource.MustParse("10Gi"))

	updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Workspace.Size = ptr.To(resource.MustParse("20Gi")) })
	got := waitNotebook(t, c, nb, "the claim grown", func(nb *notebooksv1alpha1.Notebook) bool {
		return nb.Status.Workspace != nil && nb.Status.Workspace.Size.String() == "20Gi"
	})
	if p := conditions.Get(got, notebooksv1alpha1.ConditionWorkspaceResizePending); p != nil {
		t.Errorf("a resize pending after it was applied: %+v", p)
	}
	if capacity := got.Status.Workspace.Capacity; capacity == nil || capacity.String() != "10Gi" {
		t.Errorf("status.workspace.capacity = %v, want the volume's 10Gi until it is expanded", capacity)
	}
	pvc, err := getOwnedPVC(t, c, nb)
	if err != nil {
		t.Fatal(err)
	}
	if size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; size.String() != "20Gi" {
		t.Errorf("the claim asks for %s, want 20Gi", size.String())
	}
}

// storageClass creates a StorageClass that allows volume expansion or not.
func storageClass(t *testing.T, c client.Client, expandable bool) string {
	t.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{GenerateName: "class-"},
		Provisioner:          "example.com/volumes",
		AllowVolumeExpansion: ptr.To(expandable),
	}
	if err := c.Create(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), sc) })
	return sc.Name
}

// bindClaim acts out the volume controller binding the workspace claim to
// a volume of the given capacity.
func bindClaim(t *testing.T, c client.Client, nb *notebooksv1alpha1.Notebook, capacity resource.Quantity) {
	t.Helper()
	pvc, err := getOwnedPVC(t, c, nb)
	if err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
	if err := c.Status().Update(t.Context(), pvc); err != nil {
		t.Fatal(err)
	}
}
