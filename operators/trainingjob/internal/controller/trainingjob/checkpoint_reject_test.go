package trainingjob

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// rejectClaims is the operator's client, except that the API server
// refuses every PersistentVolumeClaim it creates, as it refuses a claim
// whose storage class name is invalid (a job accepted by an older CRD) or
// as an admission webhook may.
type rejectClaims struct{ client.Client }

func (c rejectClaims) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, obj.GetName(), field.ErrorList{
			field.Invalid(field.NewPath("spec", "storageClassName"), "Fast_SSD", "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"),
		})
	}
	return c.Client.Create(ctx, obj, opts...)
}

// TestRejectedCheckpointClaimStalls: a claim the API server refuses cannot
// be created by trying again; the job is Stalled with the API's message,
// as for a refused child, instead of retrying forever.
func TestRejectedCheckpointClaimStalls(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, func(r *Reconciler) { r.Client = rejectClaims{r.Client} })
	tj := checkpointed(ns, "refused", 1, 3, 0)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionStalled)
	})
	stalled := conditions.Get(got, commonv1alpha1.ConditionStalled)
	if stalled.Reason != commonv1alpha1.ReasonChildRejected || !strings.Contains(stalled.Message, "refused-checkpoint") || !strings.Contains(stalled.Message, "lowercase RFC 1123 subdomain") {
		t.Errorf("Stalled %s: %q, want %s naming the claim and the API's message", stalled.Reason, stalled.Message, commonv1alpha1.ReasonChildRejected)
	}
	if c := conditions.Get(got, trainingv1alpha1.ConditionCheckpointReady); c == nil || c.Status != "False" || c.Reason != commonv1alpha1.ReasonChildRejected {
		t.Errorf("CheckpointReady %+v, want False/%s", c, commonv1alpha1.ReasonChildRejected)
	}
	if names := jobsOf(t, c, tj); len(names) != 0 {
		t.Errorf("jobs %v were created without their checkpoint claim", names)
	}
}
