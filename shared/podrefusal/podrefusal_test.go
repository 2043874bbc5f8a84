package podrefusal

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCause(t *testing.T) {
	cases := map[string]struct {
		event      corev1.Event
		wantReason string
	}{
		"quota": {
			event:      corev1.Event{Reason: "FailedCreate", Message: `Error creating: pods "a-0-xyz" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=0, limited: pods=0 `},
			wantReason: ReasonQuotaExceeded,
		},
		"pod security": {
			event:      corev1.Event{Reason: "FailedCreate", Message: `Error creating: pods "a-0-xyz" is forbidden: violates PodSecurity "restricted:latest": host namespaces`},
			wantReason: "FailedCreate",
		},
		"kubeflow webhook": {
			event:      corev1.Event{Reason: "FailedCreatePod", Message: `Error creating: admission webhook "deny.example.com" denied the request: no`},
			wantReason: "FailedCreatePod",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason, message := Cause(&tc.event)
			if reason != tc.wantReason || message == "" || message[len(message)-1] == ' ' {
				t.Errorf("Cause = %q, %q; want reason %q and the trimmed message", reason, message, tc.wantReason)
			}
		})
	}
}

func TestSameRefusal(t *testing.T) {
	cases := map[string]struct {
		a, b string
		want bool
	}{
		"another generated pod name": {
			a: `Error creating: pods "job-r1-0-abcde" is forbidden: exceeded quota: compute`, b: `Error creating: pods "job-r1-0-fghij" is forbidden: exceeded quota: compute`, want: true,
		},
		"another cause": {
			a: `Error creating: pods "job-r1-0-abcde" is forbidden: exceeded quota: compute`, b: `Error creating: pods "job-r1-0-abcde" is forbidden: violates PodSecurity "restricted:latest"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SameRefusal(tc.a, tc.b); got != tc.want {
				t.Errorf("SameRefusal = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestMPILauncherSourceSelectsOnlyRefusals(t *testing.T) {
	cases := map[string]struct {
		message string
		want    bool
	}{
		"launcher refused":  {`launcher pod created failed: pods "a-launcher" is forbidden: violates PodSecurity "restricted:latest"`, true},
		"job failed":        {"MPIJob ns/a is failed because 1 Launcher replica(s) failed.", false},
		"refusal elsewhere": {"", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := KubeflowMPILauncher.selects(&corev1.Event{Message: tc.message}); got != tc.want {
				t.Errorf("selects(%q) = %t, want %t", tc.message, got, tc.want)
			}
		})
	}
	if !KubeflowTrainingOperator.selects(&corev1.Event{Message: "anything"}) {
		t.Error("a source without a message prefix must select every event of its reason")
	}
}
