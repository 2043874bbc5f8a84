package trainingjob

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// conflictAfterClaim is the operator's client, except that once it has
// created the checkpoint claim named claim, the next failures status
// patches of the TrainingJob named job fail with a conflict: the status
// write of the reconcile that created the claim fails, retries included.
type conflictAfterClaim struct {
	client.Client
	job, claim string
	armed      atomic.Bool
	failures   atomic.Int32
}

func (c *conflictAfterClaim) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	if _, ok := obj.(*corev1.PersistentVolumeClaim); ok && err == nil && obj.GetName() == c.claim {
		c.armed.Store(true)
	}
	return err
}

func (c *conflictAfterClaim) Status() client.SubResourceWriter {
	return conflictStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type conflictStatus struct {
	client.SubResourceWriter
	c *conflictAfterClaim
}

func (w conflictStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if obj.GetName() == w.c.job && w.c.armed.Load() && w.c.failures.Add(-1) >= 0 {
		return apierrors.NewConflict(schema.GroupResource{Group: trainingv1alpha1.GroupVersion.Group, Resource: "trainingjobs"}, obj.GetName(), errConflictForTest)
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

var errConflictForTest = apierrors.NewBadRequest("a concurrent writer, acted out by the test")

// TestCheckpointClaimCreatedSurvivesAFailedStatusWrite fails every attempt
// of the status write in the reconcile that created the checkpoint claim:
// the next reconcile finds the claim existing, and the event is still
// recorded, once.
func TestCheckpointClaimCreatedSurvivesAFailedStatusWrite(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	var intercepted *conflictAfterClaim
	startOperator(t, func(r *Reconciler) {
		intercepted = &conflictAfterClaim{Client: r.Client, job: "lost", claim: "lost-checkpoint"}
		// Every attempt of the patch helper, so the reconcile fails.
		intercepted.failures.Store(5)
		r.Client = intercepted
	})
	tj := checkpointed(ns, "lost", 1, 0, 0)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "the claim recorded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return tj.Status.CheckpointClaim != ""
	})
	if n := intercepted.failures.Load(); n >= 0 {
		t.Fatalf("the status write after the claim's creation did not fail as intended (%d failures left)", n+1)
	}
	testenv.WaitForEvent(t, c, got, "CheckpointClaimCreated")
	got = waitTJ(t, c, tj, "CheckpointReady", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionCheckpointReady)
	})
	events := &corev1.EventList{}
	if err := c.List(t.Context(), events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.InvolvedObject.UID == got.UID && e.Reason == "CheckpointClaimCreated" {
			n += int(max(e.Count, 1))
		}
	}
	if n != 1 {
		t.Errorf("CheckpointClaimCreated recorded %d times, want once", n)
	}
}
