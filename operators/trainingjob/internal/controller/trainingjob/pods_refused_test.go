package trainingjob

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// TestARetriedRefusalChangesNothing: the Job controller retries a refused
// pod under a new generated name; the status keeps the words it recorded,
// so the retry costs neither a status write nor an event. Another cause is
// a new message and a new event.
func TestARetriedRefusalChangesNothing(t *testing.T) {
	refusal := func(pod, cause string) *corev1.Event {
		return &corev1.Event{Reason: "FailedCreate", Message: `Error creating: pods "` + pod + `" is forbidden: ` + cause}
	}
	tj := newTrainingJob("ns", "j", 1)
	o := observation{kind: "Job", jobName: "j-r1", run: 1, job: &backend.RunState{}, refusal: refusal("j-r1-0-abcde", "exceeded quota: compute")}
	setStatus(tj, o)
	first := conditions.Get(tj, trainingv1alpha1.ConditionRunning).DeepCopy()
	if first.Reason != commonv1alpha1.ReasonPodsRefused || tj.Status.Phase != trainingv1alpha1.PhasePending {
		t.Fatalf("Running %+v phase %s", first, tj.Status.Phase)
	}
	if e := refusalEvent(nil, tj.Status.Conditions); e == nil || e.Type != corev1.EventTypeWarning {
		t.Fatalf("no Warning event for the first refusal: %+v", e)
	}

	before := slices.Clone(tj.Status.Conditions)
	o.refusal = refusal("j-r1-0-fghij", "exceeded quota: compute")
	setStatus(tj, o)
	if got := conditions.Get(tj, trainingv1alpha1.ConditionRunning); got.Message != first.Message {
		t.Errorf("a retry under another pod name changed the message to %q", got.Message)
	}
	if e := refusalEvent(before, tj.Status.Conditions); e != nil {
		t.Errorf("a retry emitted %+v", e)
	}

	o.refusal = refusal("j-r1-0-klmno", `violates PodSecurity "restricted:latest": host namespaces`)
	setStatus(tj, o)
	if e := refusalEvent(before, tj.Status.Conditions); e == nil {
		t.Error("another cause emitted no event")
	}
}
