package kueuecompat

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	tjcontroller "github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestKueueDeactivatedWorkloadStallsTheJob: an administrator deactivates
// the Workload of a waiting job (spec.active false); the TrainingJob says
// so, Stalled with Kueue's reason and a Warning event, instead of waiting
// for an admission that cannot come, and waits again once the Workload is
// active.
func TestKueueDeactivatedWorkloadStallsTheJob(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})

	tj := s.trainingJob("parked", "team-queue", 1, 2)
	s.create(t, tj)
	job := s.waitJob(t, "parked-r1", "created", func(*batchv1.Job) bool { return true })
	wl := s.waitWorkload(t, job, "pending", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "QuotaReserved") == "False" })
	s.waitTJ(t, tj, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })

	s.setActive(t, wl, false)
	got := s.waitTJ(t, tj, "Stalled by the deactivation", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, commonv1alpha1.ConditionStalled)
		return c != nil && c.Reason == tjcontroller.ReasonWorkloadDeactivated && strings.Contains(c.Message, wl.GetName())
	})
	t.Logf("Stalled: %s", conditions.Get(got, commonv1alpha1.ConditionStalled).Message)
	if ev := testenv.WaitForEvent(t, s.c, tj, tjcontroller.ReasonWorkloadDeactivated); ev.Type != corev1.EventTypeWarning {
		t.Errorf("%s event type %s", ev.Reason, ev.Type)
	}

	s.setActive(t, wl, true)
	s.waitTJ(t, tj, "waiting again", func(tj *trainingv1alpha1.TrainingJob) bool {
		return queued(tj, tjcontroller.ReasonWaiting) && conditions.Get(tj, commonv1alpha1.ConditionStalled) == nil
	})
}

// setActive sets a Workload's spec.active, as an administrator does.
func (s *stack) setActive(t *testing.T, wl *unstructured.Unstructured, active bool) {
	t.Helper()
	patch := []byte(`{"spec":{"active":false}}`)
	if active {
		patch = []byte(`{"spec":{"active":true}}`)
	}
	testenv.Eventually(t, "set spec.active of "+wl.GetName(), func(ctx context.Context) (bool, error) {
		err := s.c.Patch(ctx, wl.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
		return err == nil, ignoreConflict(err)
	})
}
