package culling

import (
	"time"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
)

// Activity is what one probe of the Jupyter server saw.
type Activity struct {
	// OK is false when the probe failed (timeout, refused, 403 from a
	// proxy, unparseable answer). A failed probe never culls.
	OK bool
	// Last is the latest kernel or terminal activity; zero when there has
	// been none since the server started.
	Last time.Time
	// Busy is true while a kernel executes code, which is activity now.
	Busy bool
}

// Input is everything one decision depends on.
type Input struct {
	Now    time.Time
	Policy config.Policy
	// StartedAt is when the server was last started by the operator
	// (recorded on the StatefulSet); it starts the lifetime and, before any
	// activity, the idle period.
	StartedAt time.Time
	Activity  Activity
	// Warned is the cull deadline already announced (status.cullDeadline),
	// zero when no warning is standing.
	Warned time.Time
}

// Action is what to do now.
type Action string

// Actions.
const (
	// None leaves the notebook running; Decision.Deadline is the warning
	// that stands (zero clears it).
	None Action = "None"
	// Warn announces Decision.Deadline (an event and status.cullDeadline).
	Warn Action = "Warn"
	// Cull stops the notebook for Decision.Reason.
	Cull Action = "Cull"
)

// Reasons for a cull.
const (
	ReasonIdle        = "Idle"
	ReasonMaxLifetime = "MaxLifetime"
)

// minNextCheck keeps a deadline that is due now from turning into a busy
// loop of immediate requeues.
const minNextCheck = time.Second

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Reason is ReasonIdle or ReasonMaxLifetime for Warn and Cull, and for
	// None while a warning stands.
	Reason string
	// Deadline is the cull deadline to show: announced by Warn, standing
	// for None (zero when no warning stands), passed for Cull.
	Deadline time.Time
	// LastActivity is the activity to report, zero when unknown.
	LastActivity time.Time
	// IdleFor is how long the notebook had been idle, for metrics.
	IdleFor time.Duration
	// NextCheck is when to look again.
	NextCheck time.Duration
}

// due is a deadline a policy imposes, and why.
type due struct {
	at     time.Time
	reason string
}

// policyFunc looks at the input and returns a deadline it imposes, or the
// zero value when it imposes none. The policies are a named list so that
// reading the package shows every reason a notebook is ever stopped.
type policyFunc func(in Input) due

var policies = []policyFunc{lifetimeDeadline, idleDeadline}

func lifetimeDeadline(in Input) due {
	if in.Policy.MaxLifetime <= 0 || in.StartedAt.IsZero() {
		return due{}
	}
	return due{at: in.StartedAt.Add(in.Policy.MaxLifetime), reason: ReasonMaxLifetime}
}

func idleDeadline(in Input) due {
	if in.Policy.IdleTimeout <= 0 || !in.Activity.OK {
		return due{}
	}
	return due{at: lastActivity(in).Add(in.Policy.IdleTimeout), reason: ReasonIdle}
}

// lastActivity is when the notebook was last used: now while a kernel is
// busy, else the latest activity Jupyter reported, and never before the
// server started (a fresh server with no kernel yet is idle since start).
func lastActivity(in Input) time.Time {
	if in.Activity.Busy {
		return in.Now
	}
	last := in.Activity.Last
	if last.Before(in.StartedAt) {
		last = in.StartedAt
	}
	return last
}

func earliest(in Input) due {
	var d due
	for _, p := range policies {
		if c := p(in); !c.at.IsZero() && (d.at.IsZero() || c.at.Before(d.at)) {
			d = c
		}
	}
	// Deadlines are shown and stored with second precision (metav1.Time);
	// computing them the same way keeps an unchanged deadline equal to the
	// announced one after a round trip through status.
	d.at = d.at.Truncate(time.Second)
	return d
}

// Decide returns what to do with a running notebook. The rules:
//   - a cull is always announced first, at least WarningPeriod ahead;
//   - a notebook is culled only once the announced deadline has passed and
//     the reason still holds;
//   - renewed activity withdraws an idle warning;
//   - a failed probe neither culls for idleness nor withdraws a warning:
//     without an answer nothing is known about activity.
func Decide(in Input) Decision {
	d := Decision{Action: None, NextCheck: in.Policy.CheckPeriod}
	if in.Activity.OK {
		d.LastActivity = lastActivity(in).Truncate(time.Second)
		d.IdleFor = in.Now.Sub(d.LastActivity)
	}
	next := earliest(in)

	if !in.Activity.OK && !in.Warned.IsZero() && (next.at.IsZero() || next.at.After(in.Warned)) {
		// The standing warning was for idleness, which cannot be checked
		// now: keep it, cull nothing, look again soon.
		d.Deadline, d.Reason = in.Warned, ReasonIdle
		return d
	}
	if next.at.IsZero() {
		return d
	}

	warnAt := next.at.Add(-in.Policy.WarningPeriod)
	switch {
	case in.Warned.IsZero() && in.Now.Before(warnAt):
		d.NextCheck = until(in.Now, warnAt, in.Policy.CheckPeriod)
	case in.Warned.IsZero():
		d.Action, d.Reason = Warn, next.reason
		d.Deadline = warnDeadline(in, next)
		d.NextCheck = until(in.Now, d.Deadline, in.Policy.CheckPeriod)
	case next.at.After(in.Warned) && in.Now.Before(warnAt):
		// Used again: the warning is withdrawn.
		d.NextCheck = until(in.Now, warnAt, in.Policy.CheckPeriod)
	case next.at.After(in.Warned):
		// Used again, but the new deadline is already within the warning
		// period: announce it.
		d.Action, d.Reason = Warn, next.reason
		d.Deadline = warnDeadline(in, next)
		d.NextCheck = until(in.Now, d.Deadline, in.Policy.CheckPeriod)
	case !in.Now.Before(in.Warned):
		d.Action, d.Reason, d.Deadline = Cull, next.reason, in.Warned
		d.NextCheck = 0
	default:
		d.Reason, d.Deadline = next.reason, in.Warned
		d.NextCheck = until(in.Now, in.Warned, in.Policy.CheckPeriod)
	}
	return d
}

func until(now, t time.Time, most time.Duration) time.Duration {
	return max(min(t.Sub(now), most), minNextCheck)
}

// warnDeadline is the deadline to announce: the policy's, but never less
// than a full warning period ahead, even when the operator was down while
// the deadline passed.
func warnDeadline(in Input, next due) time.Time {
	if floor := in.Now.Add(in.Policy.WarningPeriod).Truncate(time.Second); floor.After(next.at) {
		return floor
	}
	return next.at
}

// ShouldReport says whether observed activity is worth a status write: the
// first activity seen, or activity newer than the reported one by at least
// the report interval. This bounds the writes of an active notebook to one
// per interval and keeps an idle one at zero.
func ShouldReport(reported, observed time.Time, interval time.Duration) bool {
	if observed.IsZero() {
		return false
	}
	if reported.IsZero() {
		return true
	}
	return observed.Sub(reported) >= interval
}
