package culling

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
)

var (
	t0     = time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)
	policy = config.Policy{IdleTimeout: time.Hour, CheckPeriod: time.Minute, WarningPeriod: 10 * time.Minute}
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestDecide(t *testing.T) {
	lifetime := policy
	lifetime.IdleTimeout = 0
	lifetime.MaxLifetime = 8 * time.Hour
	both := policy
	both.MaxLifetime = 8 * time.Hour
	off := config.Policy{CheckPeriod: time.Minute, WarningPeriod: 10 * time.Minute}

	for name, tc := range map[string]struct {
		in   Input
		want Decision
	}{
		"idle but within the timeout: check again at the warning time at the latest": {
			in:   Input{Now: at(20 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(10 * time.Minute)}},
			want: Decision{Action: None, LastActivity: at(10 * time.Minute), IdleFor: 10 * time.Minute, NextCheck: time.Minute},
		},
		"idle into the warning period: warn a full warning period ahead": {
			in:   Input{Now: at(62 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(10 * time.Minute)}},
			want: Decision{Action: Warn, Reason: ReasonIdle, Deadline: at(72 * time.Minute), LastActivity: at(10 * time.Minute), IdleFor: 52 * time.Minute, NextCheck: time.Minute},
		},
		"warned and still idle before the deadline: keep the warning": {
			in:   Input{Now: at(69*time.Minute + 30*time.Second), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(10 * time.Minute)}, Warned: at(70 * time.Minute)},
			want: Decision{Action: None, Reason: ReasonIdle, Deadline: at(70 * time.Minute), LastActivity: at(10 * time.Minute), IdleFor: 59*time.Minute + 30*time.Second, NextCheck: 30 * time.Second},
		},
		"warned and idle past the deadline: cull": {
			in:   Input{Now: at(71 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(10 * time.Minute)}, Warned: at(70 * time.Minute)},
			want: Decision{Action: Cull, Reason: ReasonIdle, Deadline: at(70 * time.Minute), LastActivity: at(10 * time.Minute), IdleFor: 61 * time.Minute},
		},
		"idle past the deadline without a warning (operator was down): warn a full period ahead, do not cull": {
			in:   Input{Now: at(3 * time.Hour), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(10 * time.Minute)}},
			want: Decision{Action: Warn, Reason: ReasonIdle, Deadline: at(3*time.Hour + 10*time.Minute), LastActivity: at(10 * time.Minute), IdleFor: 170 * time.Minute, NextCheck: time.Minute},
		},
		"busy kernel at the deadline is activity now: warning withdrawn, no cull": {
			in:   Input{Now: at(71 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(10 * time.Minute), Busy: true}, Warned: at(70 * time.Minute)},
			want: Decision{Action: None, LastActivity: at(71 * time.Minute), NextCheck: time.Minute},
		},
		"terminal activity after the warning withdraws it": {
			in:   Input{Now: at(66 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(65 * time.Minute)}, Warned: at(70 * time.Minute)},
			want: Decision{Action: None, LastActivity: at(65 * time.Minute), IdleFor: time.Minute, NextCheck: time.Minute},
		},
		"activity that still leaves the new deadline inside the warning period: warn again with it": {
			in:   Input{Now: at(80 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(25 * time.Minute)}, Warned: at(70 * time.Minute)},
			want: Decision{Action: Warn, Reason: ReasonIdle, Deadline: at(90 * time.Minute), LastActivity: at(25 * time.Minute), IdleFor: 55 * time.Minute, NextCheck: time.Minute},
		},
		"no activity ever: idle since the server started": {
			in:   Input{Now: at(55 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true}},
			want: Decision{Action: Warn, Reason: ReasonIdle, Deadline: at(65 * time.Minute), LastActivity: t0, IdleFor: 55 * time.Minute, NextCheck: time.Minute},
		},
		"activity from before a restart does not count against the new run": {
			in:   Input{Now: at(30 * time.Minute), Policy: policy, StartedAt: at(20 * time.Minute), Activity: Activity{OK: true, Last: at(-5 * time.Hour)}},
			want: Decision{Action: None, LastActivity: at(20 * time.Minute), IdleFor: 10 * time.Minute, NextCheck: time.Minute},
		},
		"probe failure past the deadline never culls and keeps the warning": {
			in:   Input{Now: at(75 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: false}, Warned: at(70 * time.Minute)},
			want: Decision{Action: None, Reason: ReasonIdle, Deadline: at(70 * time.Minute), NextCheck: time.Minute},
		},
		"probe timeout without a warning: nothing happens": {
			in:   Input{Now: at(5 * time.Hour), Policy: policy, StartedAt: t0, Activity: Activity{OK: false}},
			want: Decision{Action: None, NextCheck: time.Minute},
		},
		"maxLifetime warns regardless of activity": {
			in:   Input{Now: at(7*time.Hour + 55*time.Minute), Policy: lifetime, StartedAt: t0, Activity: Activity{OK: true, Busy: true}},
			want: Decision{Action: Warn, Reason: ReasonMaxLifetime, Deadline: at(8*time.Hour + 5*time.Minute), LastActivity: at(7*time.Hour + 55*time.Minute), NextCheck: time.Minute},
		},
		"maxLifetime culls a busy notebook once warned": {
			in:   Input{Now: at(8 * time.Hour), Policy: lifetime, StartedAt: t0, Activity: Activity{OK: true, Busy: true}, Warned: at(8 * time.Hour)},
			want: Decision{Action: Cull, Reason: ReasonMaxLifetime, Deadline: at(8 * time.Hour), LastActivity: at(8 * time.Hour)},
		},
		"maxLifetime culls even when the probe fails": {
			in:   Input{Now: at(8*time.Hour + time.Minute), Policy: lifetime, StartedAt: t0, Activity: Activity{OK: false}, Warned: at(8 * time.Hour)},
			want: Decision{Action: Cull, Reason: ReasonMaxLifetime, Deadline: at(8 * time.Hour)},
		},
		"a busy notebook with both policies is warned for its lifetime": {
			in:   Input{Now: at(7*time.Hour + 51*time.Minute), Policy: both, StartedAt: t0, Activity: Activity{OK: true, Busy: true}},
			want: Decision{Action: Warn, Reason: ReasonMaxLifetime, Deadline: at(8*time.Hour + time.Minute), LastActivity: at(7*time.Hour + 51*time.Minute), NextCheck: time.Minute},
		},
		"culling off: no decision, checks at the period": {
			in:   Input{Now: at(30 * time.Hour), Policy: off, StartedAt: t0, Activity: Activity{OK: true, Last: t0}},
			want: Decision{Action: None, LastActivity: t0, IdleFor: 30 * time.Hour, NextCheck: time.Minute},
		},
		"idle exactly at the warning time: the deadline stays the idle deadline": {
			in:   Input{Now: at(60 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(10 * time.Minute)}},
			want: Decision{Action: Warn, Reason: ReasonIdle, Deadline: at(70 * time.Minute), LastActivity: at(10 * time.Minute), IdleFor: 50 * time.Minute, NextCheck: time.Minute},
		},
		"sub-second activity keeps an announced deadline stable": {
			in:   Input{Now: at(65 * time.Minute), Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(10*time.Minute + 700*time.Millisecond)}, Warned: at(70 * time.Minute)},
			want: Decision{Action: None, Reason: ReasonIdle, Deadline: at(70 * time.Minute), LastActivity: at(10 * time.Minute), IdleFor: 55 * time.Minute, NextCheck: time.Minute},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWarnThenCull walks one idle notebook through a day of checks and
// asserts that the cull comes only after a warning and only once.
func TestWarnThenCull(t *testing.T) {
	var warned time.Time
	var actions []Action
	for now := t0; now.Before(at(3 * time.Hour)); now = now.Add(time.Minute) {
		d := Decide(Input{Now: now, Policy: policy, StartedAt: t0, Activity: Activity{OK: true, Last: at(5 * time.Minute)}, Warned: warned})
		if d.Action != None {
			actions = append(actions, d.Action)
		}
		if d.Action == Cull {
			if want := at(65 * time.Minute); !now.Equal(want) {
				t.Errorf("culled at %v, want %v", now, want)
			}
			break
		}
		warned = d.Deadline
	}
	if diff := cmp.Diff([]Action{Warn, Cull}, actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

func TestShouldReport(t *testing.T) {
	for name, tc := range map[string]struct {
		reported, observed time.Time
		want               bool
	}{
		"first activity":                  {observed: t0, want: true},
		"nothing observed":                {reported: t0, want: false},
		"unchanged":                       {reported: t0, observed: t0, want: false},
		"newer within the interval":       {reported: t0, observed: at(9 * time.Minute), want: false},
		"newer by the interval":           {reported: t0, observed: at(10 * time.Minute), want: true},
		"older than reported (a restart)": {reported: t0, observed: at(-time.Hour), want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ShouldReport(tc.reported, tc.observed, 10*time.Minute); got != tc.want {
				t.Errorf("ShouldReport = %v, want %v", got, tc.want)
			}
		})
	}
}
