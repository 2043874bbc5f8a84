package restart

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/failure"
)

func TestDelay(t *testing.T) {
	cases := map[string]struct {
		base time.Duration
		n    int32
		want time.Duration
	}{
		"first restart waits the base":    {base: 30 * time.Second, n: 1, want: 30 * time.Second},
		"second doubles":                  {base: 30 * time.Second, n: 2, want: time.Minute},
		"fifth":                           {base: 30 * time.Second, n: 5, want: 8 * time.Minute},
		"capped at an hour":               {base: 30 * time.Second, n: 8, want: time.Hour},
		"far beyond the cap, no overflow": {base: time.Hour, n: 100, want: time.Hour},
		"zero base means no wait":         {base: 0, n: 3, want: 0},
		"a base above the cap is capped":  {base: 2 * time.Hour, n: 1, want: time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Delay(tc.base, tc.n); got != tc.want {
				t.Errorf("Delay(%s, %d) = %s, want %s", tc.base, tc.n, got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	auto := &trainingv1alpha1.Checkpoint{Resume: trainingv1alpha1.ResumeAuto, MaxRestarts: ptr.To[int32](2), RestartBackoffSeconds: ptr.To[int32](10)}
	preempted := failure.Result{Class: trainingv1alpha1.FailureClassInfrastructure, Cause: failure.CausePreempted}
	oom := failure.Result{Class: trainingv1alpha1.FailureClassUser, Cause: failure.CauseOOMKilled}
	unknown := failure.Result{Class: trainingv1alpha1.FailureClassUnknown, Cause: failure.CauseUnknown}
	cases := map[string]struct {
		cp       *trainingv1alpha1.Checkpoint
		restarts int32
		f        failure.Result
		want     Decision
	}{
		"first infrastructure failure restarts after the base delay": {cp: auto, f: preempted, want: Decision{Restart: true, NextRunTime: now.Add(10 * time.Second)}},
		"second one backs off twice as long":                         {cp: auto, restarts: 1, f: preempted, want: Decision{Restart: true, NextRunTime: now.Add(20 * time.Second)}},
		"maxRestarts exhausted": {cp: auto, restarts: 2, f: preempted,
			want: Decision{Reason: ReasonRestartsExhaust, Message: "2 of 2 restarts used (maxRestarts)"}},
		"user errors fail fast": {cp: auto, f: oom,
			want: Decision{Reason: ReasonNotRetryable, Message: "The failure (OOMKilled, class User) is not one a new run fixes; not restarting"}},
		"unknown failures are not retried": {cp: auto, f: unknown,
			want: Decision{Reason: ReasonNotRetryable, Message: "The failure (Unknown, class Unknown) is not one a new run fixes; not restarting"}},
		"resume Never": {cp: &trainingv1alpha1.Checkpoint{Resume: trainingv1alpha1.ResumeNever}, f: preempted,
			want: Decision{Reason: ReasonResumeNever, Message: "checkpoint.resume is Never, so a failure is final"}},
		"no checkpoint": {f: preempted, want: Decision{Reason: ReasonNoCheckpoint, Message: "The job has no checkpoint, so a failure is final"}},
		"unset fields take the CRD defaults": {cp: &trainingv1alpha1.Checkpoint{}, restarts: 2, f: preempted,
			want: Decision{Restart: true, NextRunTime: now.Add(120 * time.Second)}},
		"maxRestarts zero never restarts": {cp: &trainingv1alpha1.Checkpoint{MaxRestarts: ptr.To[int32](0)}, f: preempted,
			want: Decision{Reason: ReasonRestartsExhaust, Message: "0 of 0 restarts used (maxRestarts)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.cp, tc.restarts, tc.f, now)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}
