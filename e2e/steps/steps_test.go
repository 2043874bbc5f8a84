package steps

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConditionReached(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: 1}
	}
	stalled := cond("Stalled", metav1.ConditionTrue, "BackendUnavailable", "the Kubeflow training-operator's CRDs are not installed")
	cases := map[string]struct {
		conds       []metav1.Condition
		typ, failed string
		status      metav1.ConditionStatus
		wantDone    bool
		wantErr     string
	}{
		"reached": {
			conds: []metav1.Condition{cond("Succeeded", metav1.ConditionTrue, "Succeeded", "")}, typ: "Succeeded", status: metav1.ConditionTrue, failed: "Failed", wantDone: true,
		},
		"still going": {
			conds: []metav1.Condition{cond("Reconciling", metav1.ConditionTrue, "PodsPending", "")}, typ: "Succeeded", status: metav1.ConditionTrue, failed: "Failed",
		},
		"stalled while awaiting success fails fast with the message": {
			conds: []metav1.Condition{stalled}, typ: "Succeeded", status: metav1.ConditionTrue, failed: "Failed",
			wantErr: "Stalled is True: BackendUnavailable: the Kubeflow training-operator's CRDs are not installed",
		},
		"stalled without a failure condition named": {
			conds: []metav1.Condition{stalled}, typ: "Ready", status: metav1.ConditionTrue, wantErr: "Stalled is True",
		},
		"failed": {
			conds: []metav1.Condition{cond("Failed", metav1.ConditionTrue, "Failed", "exit 1")}, typ: "Succeeded", status: metav1.ConditionTrue, failed: "Failed", wantErr: "Failed is True: Failed: exit 1",
		},
		"awaiting Failed of a job that is Stalled because it failed": {
			conds: []metav1.Condition{cond("Failed", metav1.ConditionTrue, "Failed", "exit 1"), stalled}, typ: "Failed", status: metav1.ConditionTrue, wantDone: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			done, err := conditionReached(tc.conds, 1, tc.typ, tc.status, tc.failed)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case done != tc.wantDone:
				t.Fatalf("done %t, want %t", done, tc.wantDone)
			}
		})
	}
}
