package kueue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// workload is a Workload with these conditions, each {type, status, reason, message}.
func workload(conds ...[4]string) *unstructured.Unstructured {
	wl := NewWorkload()
	var list []any
	for _, c := range conds {
		list = append(list, map[string]any{"type": c[0], "status": c[1], "reason": c[2], "message": c[3]})
	}
	_ = unstructured.SetNestedSlice(wl.Object, list, "status", "conditions")
	return wl
}

func TestObserveUsesKueuesOwnWords(t *testing.T) {
	noQuota := [4]string{"QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu"}
	for name, tc := range map[string]struct {
		wl          *unstructured.Unstructured
		want        State
		wantMessage string
	}{
		"no conditions yet": {wl: workload()},
		"no quota": {
			wl:          workload(noQuota),
			want:        State{Reason: "Pending", Message: noQuota[3]},
			wantMessage: noQuota[3],
		},
		"preempted": {
			wl:          workload(noQuota, [4]string{"Evicted", "True", "Preempted", "Preempted to accommodate a workload"}),
			want:        State{Reason: "Preempted", Message: "Preempted to accommodate a workload"},
			wantMessage: "Preempted: Preempted to accommodate a workload",
		},
		"admitted": {
			wl:   workload([4]string{"QuotaReserved", "True", "QuotaReserved", "Quota reserved"}, [4]string{"Admitted", "True", "Admitted", "The workload is admitted"}),
			want: State{Admitted: true},
		},
		"quota reserved, admission checks pending": {
			wl: workload([4]string{"QuotaReserved", "True", "QuotaReserved", "Quota reserved"}, [4]string{"Admitted", "False", "NoChecks", ""}),
		},
		"finished": {
			wl:   workload([4]string{"Admitted", "True", "Admitted", ""}, [4]string{"Finished", "True", "Succeeded", ""}),
			want: State{Admitted: true, Finished: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Observe(tc.wl)); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
			if got := WaitMessage(tc.wl); got != tc.wantMessage {
				t.Errorf("WaitMessage = %q, want %q", got, tc.wantMessage)
			}
		})
	}
}
