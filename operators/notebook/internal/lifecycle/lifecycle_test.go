package lifecycle

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/culling"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
)

var (
	now     = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	nowText = now.Format(time.RFC3339)
	hourAgo = now.Add(-time.Hour).Format(time.RFC3339)
	idle    = config.Policy{IdleTimeout: 30 * time.Minute, CheckPeriod: time.Minute, WarningPeriod: 10 * time.Minute}
	busy    = &jupyter.Observation{Busy: true, LastActivity: now}
	quiet   = &jupyter.Observation{LastActivity: now.Add(-5 * time.Minute)}
	failed  = &jupyter.Observation{Err: errors.New("refused")}
)

// pending is the input of a running server whose last answer, probe (nil
// for none yet), is too old for the decisions: a new probe runs.
func pending(probe *jupyter.Observation) Input {
	i := running(probe)
	i.ProbePending = true
	return i
}

// running is the input of a server that runs, was started an hour ago and
// was probed.
func running(probe *jupyter.Observation) Input {
	return Input{
		Now: now, Exists: true, Running: true, Probe: probe, Policy: idle, ReportInterval: 10 * time.Minute,
		Recorded: map[string]string{render.AnnotationStartedAt: hourAgo},
	}
}

func TestRecorded(t *testing.T) {
	for name, tc := range map[string]struct {
		in   Input
		want map[string]string
	}{
		"a new server: standing requests are not pending": {
			in:   Input{RestartRequest: "r1", ForceRequest: "f1"},
			want: map[string]string{render.AnnotationRestartHandled: "r1", render.AnnotationForceUpdateHandled: "f1"},
		},
		"an existing server: its decisions only": {
			in: Input{Exists: true, RestartRequest: "r2", Recorded: map[string]string{
				render.AnnotationCulled: "Idle", render.AnnotationRestartHandled: "r1", render.AnnotationTemplateHash: "h",
			}},
			want: map[string]string{render.AnnotationCulled: "Idle", render.AnnotationRestartHandled: "r1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Recorded(tc.in)); diff != "" {
				t.Errorf("Recorded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRestartAfterCullAndSuspend(t *testing.T) {
	culled := func() map[string]string {
		return map[string]string{render.AnnotationCulled: "Idle", render.AnnotationCulledAt: hourAgo, render.AnnotationRestartHandled: "r1"}
	}
	for name, tc := range map[string]struct {
		in                 Input
		wantCulled         string
		wantRestarted      bool
		wantCulledFor      time.Duration
		wantRestartHandled string
		decide             []func(Input, *Outcome)
	}{
		"a new restart request ends the cull": {
			in: Input{Now: now, RestartRequest: "r2"}, wantRestarted: true, wantCulledFor: time.Hour, wantRestartHandled: "r2",
		},
		"the handled request does not": {
			in: Input{Now: now, RestartRequest: "r1"}, wantCulled: "Idle", wantRestartHandled: "r1",
		},
		"no request does not": {
			in: Input{Now: now}, wantCulled: "Idle", wantRestartHandled: "r1",
		},
		"suspending ends the cull": {
			in: Input{Now: now, Suspend: true}, wantCulledFor: time.Hour, wantRestartHandled: "r1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			out := &Outcome{Annotations: culled()}
			RestartAfterCull(tc.in, out)
			SuspendEndsCull(tc.in, out)
			if out.Culled != tc.wantCulled || out.Restarted != tc.wantRestarted || out.WasCulledFor != tc.wantCulledFor {
				t.Errorf("culled %q restarted %v culled for %v, want %q %v %v", out.Culled, out.Restarted, out.WasCulledFor, tc.wantCulled, tc.wantRestarted, tc.wantCulledFor)
			}
			if got := out.Annotations[render.AnnotationRestartHandled]; got != tc.wantRestartHandled {
				t.Errorf("restart handled %q, want %q", got, tc.wantRestartHandled)
			}
			if _, ok := out.Annotations[render.AnnotationCulledAt]; ok != (tc.wantCulled != "") {
				t.Errorf("culled-at recorded %v while culled is %q", ok, tc.wantCulled)
			}
		})
	}
}

func TestStart(t *testing.T) {
	for name, tc := range map[string]struct {
		in           Input
		culled       string
		wantReplicas int32
		wantStarted  bool
	}{
		"a stopped server starts":          {in: Input{Now: now, WasStopped: true}, wantReplicas: 1, wantStarted: true},
		"a running server keeps its start": {in: Input{Now: now}, wantReplicas: 1},
		"suspended":                        {in: Input{Now: now, WasStopped: true, Suspend: true}, wantReplicas: 0},
		"culled":                           {in: Input{Now: now, WasStopped: true}, culled: "Idle", wantReplicas: 0},
	} {
		t.Run(name, func(t *testing.T) {
			out := &Outcome{Culled: tc.culled, Annotations: map[string]string{}}
			Start(tc.in, out)
			_, started := out.Annotations[render.AnnotationStartedAt]
			if out.Replicas != tc.wantReplicas || started != tc.wantStarted {
				t.Errorf("replicas %d started %v, want %d %v", out.Replicas, started, tc.wantReplicas, tc.wantStarted)
			}
			if started && out.Annotations[render.AnnotationStartedAt] != nowText {
				t.Errorf("started at %q, want %q", out.Annotations[render.AnnotationStartedAt], nowText)
			}
		})
	}
}

func TestCull(t *testing.T) {
	for name, tc := range map[string]struct {
		in                    Input
		wantAction            culling.Action // "" for no decision
		wantReplicas          int32
		wantRequeue           bool
		wantRestartHandledSet bool
		// wantLastActivity, when set, is the activity the decision reports.
		wantLastActivity time.Time
	}{
		"idle past the timeout: culled": {
			in: func() Input {
				i := running(&jupyter.Observation{LastActivity: now.Add(-time.Hour)})
				i.Warned = now.Add(-time.Minute)
				return i
			}(),
			wantAction: culling.Cull, wantRestartHandledSet: true,
		},
		"busy: kept, checked again": {in: running(busy), wantAction: culling.None, wantReplicas: 1, wantRequeue: true},
		"culling off, probed: activity reported, checked again": {
			in:         func() Input { i := running(quiet); i.Policy = config.Policy{CheckPeriod: time.Minute}; return i }(),
			wantAction: culling.None, wantReplicas: 1, wantRequeue: true, wantLastActivity: quiet.LastActivity,
		},
		"culling off, kernel busy: activity now, checked again": {
			in: func() Input {
				i := running(&jupyter.Observation{Busy: true, LastActivity: now.Add(-3 * time.Hour)})
				i.Policy = config.Policy{CheckPeriod: time.Minute}
				return i
			}(),
			wantAction: culling.None, wantReplicas: 1, wantRequeue: true, wantLastActivity: now,
		},
		"just started, not probed: no decision yet": {
			in:           func() Input { i := running(nil); i.WasStopped = true; return i }(),
			wantReplicas: 1,
		},
		"stopped: nothing to cull": {in: running(busy), wantReplicas: 0},
		"idle past the deadline on an old answer, a new one pending: no decision until it is in": {
			in: func() Input {
				i := pending(&jupyter.Observation{LastActivity: now.Add(-time.Hour)})
				i.Warned = now.Add(-time.Minute)
				return i
			}(),
			wantReplicas: 1,
		},
		"past the lifetime, an answer pending: no decision until it is in": {
			in: func() Input {
				i := pending(nil)
				i.Policy.MaxLifetime = time.Minute
				return i
			}(),
			wantReplicas: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			out := &Outcome{Replicas: 1, Annotations: map[string]string{render.AnnotationStartedAt: hourAgo}}
			if name == "stopped: nothing to cull" {
				out.Replicas = 0
			}
			Cull(tc.in, out)
			var action culling.Action
			if out.Culling != nil {
				action = out.Culling.Action
			}
			if action != tc.wantAction || out.Replicas != tc.wantReplicas || (out.RequeueAfter > 0) != tc.wantRequeue {
				t.Errorf("action %q replicas %d requeue %v, want %q %d %v", action, out.Replicas, out.RequeueAfter, tc.wantAction, tc.wantReplicas, tc.wantRequeue)
			}
			if tc.wantRequeue && out.RequeueAfter > tc.in.ReportInterval {
				t.Errorf("requeue after %v, want within the report interval %v", out.RequeueAfter, tc.in.ReportInterval)
			}
			if !tc.wantLastActivity.IsZero() && (out.Culling == nil || !out.Culling.LastActivity.Equal(tc.wantLastActivity)) {
				t.Errorf("decision %+v, want last activity %v", out.Culling, tc.wantLastActivity)
			}
			_, handled := out.Annotations[render.AnnotationRestartHandled]
			if handled != tc.wantRestartHandledSet || out.JustCulled != (tc.wantAction == culling.Cull) {
				t.Errorf("restart handled recorded %v, just culled %v", handled, out.JustCulled)
			}
			if out.JustCulled && (out.Culled != culling.ReasonIdle || out.Annotations[render.AnnotationCulledAt] != nowText) {
				t.Errorf("a cull records %q at %q", out.Culled, out.Annotations[render.AnnotationCulledAt])
			}
		})
	}
}

func TestRecheck(t *testing.T) {
	for name, tc := range map[string]struct {
		in       Input
		requeue  time.Duration
		replicas int32
		want     time.Duration
	}{
		"not answering":               {in: running(failed), replicas: 1, want: RetryNotAnswering},
		"not answering, check sooner": {in: running(failed), replicas: 1, requeue: 5 * time.Second, want: 5 * time.Second},
		"no token yet":                {in: running(nil), replicas: 1, want: 2 * time.Second},
		"answering":                   {in: running(quiet), replicas: 1},
		"stopping":                    {in: running(failed), replicas: 0},
		"probe pending: its answer brings it back, no timer": {in: pending(failed), replicas: 1},
		"first probe pending":                                {in: pending(nil), replicas: 1},
	} {
		t.Run(name, func(t *testing.T) {
			out := &Outcome{Replicas: tc.replicas, RequeueAfter: tc.requeue}
			Recheck(tc.in, out)
			if out.RequeueAfter != tc.want {
				t.Errorf("requeue after %v, want %v", out.RequeueAfter, tc.want)
			}
		})
	}
}

func TestTemplateChange(t *testing.T) {
	changed := func(probe *jupyter.Observation, force string) Input {
		i := running(probe)
		i.TemplateChanged, i.ForceRequest = true, force
		return i
	}
	changedPending := func(probe *jupyter.Observation, force string) Input {
		i := changed(probe, force)
		i.ProbePending = true
		return i
	}
	for name, tc := range map[string]struct {
		in                        Input
		handled                   string
		wantApplied, wantDeferred bool
		wantAwaiting              bool
	}{
		"idle kernel: applied":                                {in: changed(quiet, ""), wantApplied: true},
		"busy kernel: deferred":                               {in: changed(busy, ""), wantDeferred: true},
		"busy kernel, forced: applied":                        {in: changed(busy, "f2"), handled: "f1", wantApplied: true},
		"busy, the handled force only":                        {in: changed(busy, "f1"), handled: "f1", wantDeferred: true},
		"not answering: applied":                              {in: changed(failed, ""), wantApplied: true},
		"unchanged template":                                  {in: running(busy)},
		"an old idle answer, a new one pending: waits for it": {in: changedPending(quiet, ""), wantAwaiting: true},
		"no answer yet: waits for it":                         {in: changedPending(nil, ""), wantAwaiting: true},
		"an old busy answer, a new one pending: deferred":     {in: changedPending(busy, ""), wantDeferred: true},
		"pending, forced: applied":                            {in: changedPending(quiet, "f2"), handled: "f1", wantApplied: true},
	} {
		t.Run(name, func(t *testing.T) {
			out := &Outcome{Replicas: 1, Annotations: map[string]string{render.AnnotationForceUpdateHandled: tc.handled}}
			TemplateChange(tc.in, out)
			if out.Applied != tc.wantApplied || out.Deferred != tc.wantDeferred || out.AwaitingProbe != tc.wantAwaiting {
				t.Errorf("applied %v deferred %v awaiting the probe %v, want %v %v %v",
					out.Applied, out.Deferred, out.AwaitingProbe, tc.wantApplied, tc.wantDeferred, tc.wantAwaiting)
			}
			if tc.wantDeferred && out.RequeueAfter != idle.CheckPeriod {
				t.Errorf("a deferred change is looked at again after %v, want %v", out.RequeueAfter, idle.CheckPeriod)
			}
			if want := max(tc.handled, tc.in.ForceRequest); tc.wantApplied && tc.in.ForceRequest != "" && out.Annotations[render.AnnotationForceUpdateHandled] != want {
				t.Errorf("force handled %q, want %q", out.Annotations[render.AnnotationForceUpdateHandled], want)
			}
		})
	}
}

func TestDecideRestartsACulledServer(t *testing.T) {
	in := Input{
		Now: now, Exists: true, WasStopped: true, Policy: idle, RestartRequest: "r2",
		Recorded: map[string]string{render.AnnotationCulled: "Idle", render.AnnotationCulledAt: hourAgo, render.AnnotationRestartHandled: "r1", render.AnnotationStartedAt: hourAgo},
	}
	out := Decide(in)
	want := map[string]string{render.AnnotationRestartHandled: "r2", render.AnnotationStartedAt: nowText}
	if diff := cmp.Diff(want, out.Annotations); diff != "" || out.Replicas != 1 || !out.Restarted {
		t.Errorf("replicas %d restarted %v, annotations (-want +got):\n%s", out.Replicas, out.Restarted, diff)
	}
}
