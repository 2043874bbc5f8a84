package trainingjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// TestQueuedShowsItsPlace: a job waiting in its queue shows its place in
// status and in the Queued condition, or why it is unknown; once admitted
// it has none.
func TestQueuedShowsItsPlace(t *testing.T) {
	for name, tc := range map[string]struct {
		queue       *queueObservation
		running     bool
		wantQueue   *commonv1alpha1.QueueStatus
		wantMessage string
	}{
		"position known": {
			queue:       &queueObservation{position: ptr.To[int32](2), message: "insufficient quota"},
			wantQueue:   &commonv1alpha1.QueueStatus{LocalQueue: "team-queue", Position: ptr.To[int32](2)},
			wantMessage: "PyTorchJob mnist-r1 waits for Kueue to admit it from queue team-queue; position 2 in LocalQueue team-queue. Kueue: insufficient quota",
		},
		"position unknown": {
			queue:       &queueObservation{unknown: "position unknown: why"},
			wantQueue:   &commonv1alpha1.QueueStatus{LocalQueue: "team-queue"},
			wantMessage: "PyTorchJob mnist-r1 waits for Kueue to admit it from queue team-queue; position unknown: why",
		},
		"admitted": {running: true},
	} {
		t.Run(name, func(t *testing.T) {
			tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team-a"}}
			tj.Spec.QueueName = "team-queue"
			tj.Status.Queue = &commonv1alpha1.QueueStatus{LocalQueue: "team-queue", Position: ptr.To[int32](7)}
			job := specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended))
			if tc.running {
				job = kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning)
			}
			setStatus(tj, observation{kind: "PyTorchJob", jobName: "mnist-r1", run: 1, job: job, queue: tc.queue, now: t0, localQueue: "team-queue"})
			if diff := cmp.Diff(tc.wantQueue, tj.Status.Queue); diff != "" {
				t.Errorf("status.queue (-want +got):\n%s", diff)
			}
			if c := conditions.Get(tj, trainingv1alpha1.ConditionQueued); tc.wantMessage != "" && (c == nil || c.Message != tc.wantMessage) {
				t.Errorf("Queued condition %+v, want message %q", c, tc.wantMessage)
			}
		})
	}
}
