package steps

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/e2e/quickstart"
)

// OperatorDeployment finds the Deployment of one of the umbrella's
// operators (quickstart.Operators) by the name its chart gives it.
func (e *Env) OperatorDeployment(t *testing.T, operator string) *appsv1.Deployment {
	t.Helper()
	var list appsv1.DeploymentList
	if err := e.C.List(t.Context(), &list, client.InNamespace(quickstart.Namespace)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if strings.HasSuffix(list.Items[i].Name, operator) {
			return &list.Items[i]
		}
	}
	t.Fatalf("no Deployment of %s in %s", operator, quickstart.Namespace)
	return nil
}

// RolledOut reports whether every replica of d (re-read) runs its current
// template and is available, and no pod of an older one is left.
func (e *Env) RolledOut(ctx context.Context, d *appsv1.Deployment) (bool, error) {
	if err := e.C.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		return false, err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	if s.ObservedGeneration != d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return false, err
	}
	var pods corev1.PodList
	if err := e.C.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return false, err
	}
	running := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			running++
		}
	}
	return int32(running) == want, nil
}
