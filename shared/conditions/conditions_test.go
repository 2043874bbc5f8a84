package conditions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

type fakeObject struct {
	metav1.ObjectMeta
	conds []metav1.Condition
}

func (f *fakeObject) GetConditions() []metav1.Condition  { return f.conds }
func (f *fakeObject) SetConditions(c []metav1.Condition) { f.conds = c }

func summary(obj Object) map[string]string {
	out := map[string]string{}
	for _, c := range obj.GetConditions() {
		out[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return out
}

func TestSetStampsGenerationAndKeepsTransitionTime(t *testing.T) {
	obj := &fakeObject{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	MarkTrue(obj, "Ready", "Up", "")
	first := Get(obj, "Ready")
	if first.ObservedGeneration != 3 {
		t.Fatalf("observedGeneration = %d, want 3", first.ObservedGeneration)
	}
	old := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	obj.conds[0].LastTransitionTime = old

	obj.Generation = 4
	MarkTrue(obj, "Ready", "StillUp", "")
	got := Get(obj, "Ready")
	if got.ObservedGeneration != 4 || got.Reason != "StillUp" {
		t.Errorf("got %+v, want generation 4 and reason StillUp", got)
	}
	if !got.LastTransitionTime.Equal(&old) {
		t.Errorf("lastTransitionTime moved to %v without a status change", got.LastTransitionTime)
	}

	MarkFalse(obj, "Ready", "Down", "")
	if Get(obj, "Ready").LastTransitionTime.Equal(&old) {
		t.Errorf("lastTransitionTime did not move on a status change")
	}
	if IsCurrent(obj, "Missing") || !IsCurrent(obj, "Ready") {
		t.Errorf("IsCurrent wrong: %+v", obj.conds)
	}
}

// TestKeepTransitionTimesAcrossRemoveAndSet: a condition removed and set
// again with the same status in one reconcile keeps the time it had as
// read; a changed status and a new condition keep their new times.
func TestKeepTransitionTimesAcrossRemoveAndSet(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	obj := &fakeObject{conds: []metav1.Condition{
		{Type: commonv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "NoWorkload", LastTransitionTime: old},
		{Type: "Running", Status: metav1.ConditionTrue, Reason: "Running", LastTransitionTime: old},
	}}
	before := append([]metav1.Condition(nil), obj.conds...)
	Remove(obj, commonv1alpha1.ConditionStalled)
	MarkStalled(obj, "NoWorkload", "again")
	MarkFalse(obj, "Running", "Queued", "")
	KeepTransitionTimes(before, obj)
	if got := Get(obj, commonv1alpha1.ConditionStalled); !got.LastTransitionTime.Equal(&old) || got.Message != "again" {
		t.Errorf("Stalled set again: %+v, want its time as read and the new message", got)
	}
	for _, typ := range []string{"Running", commonv1alpha1.ConditionReady} {
		if got := Get(obj, typ); got.LastTransitionTime.Equal(&old) {
			t.Errorf("%s changed status or is new but kept the old time: %+v", typ, got)
		}
	}
}

func TestKstatusHelpers(t *testing.T) {
	cases := map[string]struct {
		mark func(Object)
		want map[string]string
	}{
		"ready clears abnormal conditions": {
			mark: func(o Object) {
				MarkStalled(o, "Bad", "")
				MarkReconciling(o, "Working", "")
				MarkReady(o, "Done", "")
			},
			want: map[string]string{"Ready": "True/Done"},
		},
		"reconciling": {
			mark: func(o Object) { MarkStalled(o, "Bad", ""); MarkReconciling(o, "Working", "") },
			want: map[string]string{"Ready": "False/Working", "Reconciling": "True/Working"},
		},
		"stalled": {
			mark: func(o Object) { MarkReconciling(o, "Working", ""); MarkStalled(o, "Bad", "") },
			want: map[string]string{"Ready": "False/Bad", "Stalled": "True/Bad"},
		},
		"succeeded": {
			mark: func(o Object) { MarkReconciling(o, "Working", ""); MarkSucceeded(o, "Completed", "") },
			want: map[string]string{"Ready": "False/Working", "Succeeded": "True/Completed", "Failed": "False/Completed"},
		},
		"failed": {
			mark: func(o Object) { MarkStalled(o, "Bad", ""); MarkFailed(o, "Crashed", "") },
			want: map[string]string{"Ready": "False/Bad", "Succeeded": "False/Crashed", "Failed": "True/Crashed"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := &fakeObject{}
			tc.mark(obj)
			if diff := cmp.Diff(tc.want, summary(obj), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsFinished(t *testing.T) {
	obj := &fakeObject{}
	if IsFinished(obj) {
		t.Fatal("a new object is not finished")
	}
	MarkFailed(obj, "Crashed", "")
	if !IsFinished(obj) || !IsTrue(obj, commonv1alpha1.ConditionFailed) {
		t.Fatal("a failed object is finished")
	}
	Remove(obj, commonv1alpha1.ConditionFailed)
	Remove(obj, "NotThere")
	if IsFinished(obj) {
		t.Fatal("removing Failed makes it unfinished")
	}
}

func TestEventTypeIsNormalOnlyForOrdinaryWaits(t *testing.T) {
	cases := map[string]struct {
		reason string
		waits  []string
		want   string
	}{
		"progressing":              {reason: commonv1alpha1.ReasonProgressing, want: "Normal"},
		"dependency not ready":     {reason: commonv1alpha1.ReasonDependencyNotReady, want: "Normal"},
		"the kind's own wait":      {reason: "WaitingForServer", waits: []string{"WaitingForServer"}, want: "Normal"},
		"dependency not found":     {reason: commonv1alpha1.ReasonDependencyNotFound, want: "Warning"},
		"invalid spec":             {reason: commonv1alpha1.ReasonInvalidSpec, want: "Warning"},
		"another kind's wait only": {reason: "WaitingForServer", want: "Warning"},
		"empty":                    {reason: "", want: "Warning"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := EventType(tc.reason, tc.waits...); got != tc.want {
				t.Errorf("EventType(%q, %q) = %s, want %s", tc.reason, tc.waits, got, tc.want)
			}
		})
	}
}
