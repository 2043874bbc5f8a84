package notebook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/kueue"
)

// TestQueuedNotebookShowsItsPlace: a Notebook waiting in its queue shows
// its place in status and in the Queued condition, or why it is unknown;
// once admitted, or stopped, it has none.
func TestQueuedNotebookShowsItsPlace(t *testing.T) {
	waiting := kueue.State{Reason: "Pending", Message: "insufficient quota"}
	for name, tc := range map[string]struct {
		queue       *queueObservation
		replicas    int32
		wantQueue   *commonv1alpha1.QueueStatus
		wantMessage string
	}{
		"position known": {
			queue:       &queueObservation{State: waiting, exists: true, position: ptr.To[int32](2)},
			replicas:    1,
			wantQueue:   &commonv1alpha1.QueueStatus{LocalQueue: "team", Position: ptr.To[int32](2)},
			wantMessage: "The Jupyter server waits for Kueue to admit it from queue team; position 2 in LocalQueue team. Kueue: insufficient quota",
		},
		"position unknown": {
			queue:       &queueObservation{State: waiting, exists: true, unknown: "position unknown: why"},
			replicas:    1,
			wantQueue:   &commonv1alpha1.QueueStatus{LocalQueue: "team"},
			wantMessage: "The Jupyter server waits for Kueue to admit it from queue team; position unknown: why. Kueue: insufficient quota",
		},
		"admitted": {
			queue:       &queueObservation{State: kueue.State{Admitted: true}, exists: true},
			replicas:    1,
			wantMessage: "Kueue admitted the Jupyter server from queue team",
		},
		"stopped": {
			queue: &queueObservation{State: waiting, exists: true, position: ptr.To[int32](1)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			nb := newNotebook("team-a", "nb")
			nb.Spec.QueueName = "team"
			nb.Status.Queue = &commonv1alpha1.QueueStatus{LocalQueue: "team", Position: ptr.To[int32](7)}
			markQueue(&scope{nb: nb, queue: tc.queue, replicas: tc.replicas})
			if diff := cmp.Diff(tc.wantQueue, nb.Status.Queue); diff != "" {
				t.Errorf("status.queue (-want +got):\n%s", diff)
			}
			c := conditions.Get(nb, notebooksv1alpha1.ConditionQueued)
			switch {
			case tc.wantMessage == "" && c != nil:
				t.Errorf("a stopped Notebook keeps %+v", c)
			case tc.wantMessage != "" && (c == nil || c.Message != tc.wantMessage):
				t.Errorf("Queued condition %+v, want message %q", c, tc.wantMessage)
			}
		})
	}
}
