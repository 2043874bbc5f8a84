package jobcontroller

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestKubectlAppliedJobKeepsItsAnnotationOutOfTheCache: a TrainingJob
// applied with kubectl carries a copy of itself in an annotation. The
// operator's cache drops it (a second copy of every job in memory), and the
// operator's status writes leave it on the live object, where kubectl's
// next apply needs it. (shared/patch's tests show that a metadata patch
// from such a cached copy keeps it too.)
func TestKubectlAppliedJobKeepsItsAnnotationOutOfTheCache(t *testing.T) {
	scheme := harness.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	op, err := harness.StartOperator(env.Config, scheme, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	ns := testenv.CreateNamespace(t, c, "lastapplied")
	tj := newTJ(ns, "applied", 2)
	applied, err := json.Marshal(tj)
	if err != nil {
		t.Fatal(err)
	}
	tj.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: string(applied), "team": "vision"}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	live := &trainingv1alpha1.TrainingJob{}
	testenv.Eventually(t, "the operator reconciled the job", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(tj), live)
		return err == nil && phase.Reconciled(live), err
	})
	if live.Annotations[corev1.LastAppliedConfigAnnotation] != string(applied) || live.Annotations["team"] != "vision" {
		t.Errorf("the live job's annotations after the operator's writes: %v", live.Annotations)
	}
	cached := &trainingv1alpha1.TrainingJob{}
	if err := op.Reconciler.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), cached); err != nil {
		t.Fatal(err)
	}
	if _, ok := cached.Annotations[corev1.LastAppliedConfigAnnotation]; ok || cached.Annotations["team"] != "vision" {
		t.Errorf("the cached job's annotations: %v, want team only", cached.Annotations)
	}
}
