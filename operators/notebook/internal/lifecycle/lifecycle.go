package lifecycle

import (
	"time"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/culling"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
)

// RetryNotAnswering is the longest a running server that does not answer
// its probe waits to be probed again.
const RetryNotAnswering = 15 * time.Second

// freshFor is the longest an answer of the probe serves the decisions. It
// is longer than a completed probe takes to bring its Notebook back on a
// loaded operator, so that reconcile takes the answer rather than ask for
// another, and shorter than a check period, so each timed check asks for
// a new one.
const freshFor = 10 * time.Second

// MaxObservationAge is how old an answer of the probe may be for the
// decisions under policy: freshFor, or half the check period when that is
// shorter.
func MaxObservationAge(policy config.Policy) time.Duration {
	if policy.CheckPeriod > 0 {
		return min(freshFor, policy.CheckPeriod/2)
	}
	return freshFor
}

// retryNoToken is how soon a running server is looked at again while its
// token is not in the cache yet.
const retryNoToken = 2 * time.Second

// Input is what the decisions read.
type Input struct {
	Now    time.Time
	Policy config.Policy
	// Suspend is the Notebook's spec.suspend.
	Suspend bool
	// RestartRequest and ForceRequest are the Notebook's restart and
	// force-update annotations.
	RestartRequest, ForceRequest string
	// Exists says the StatefulSet exists; Recorded are its decision
	// annotations (DecisionKeys).
	Exists   bool
	Recorded map[string]string
	// WasStopped: the StatefulSet is absent or asks for no pod.
	WasStopped bool
	// Running: the StatefulSet asks for a pod and it is ready.
	Running bool
	// Probe is the latest answer of the running server's probe, nil
	// before the first.
	Probe *jupyter.Observation
	// ProbePending: Probe is older than MaxObservationAge or absent, and
	// a new probe runs. Decisions on the server's activity wait for its
	// answer, which brings the Notebook back.
	ProbePending bool
	// Warned is the standing cull deadline (status.cullDeadline), zero
	// when none.
	Warned time.Time
	// TemplateChanged: the StatefulSet's pod template differs from the
	// one the Notebook asks for.
	TemplateChanged bool
	// ReportInterval is how far status.lastActivity may lag behind the
	// activity the prober sees.
	ReportInterval time.Duration
}

// Outcome is what the decisions decided.
type Outcome struct {
	Replicas int32
	// Annotations are the decision annotations to record.
	Annotations map[string]string
	// Culled is the reason while the server is culled.
	Culled       string
	JustCulled   bool
	Restarted    bool
	WasCulledFor time.Duration
	// Culling is the culling decision, nil when none was made.
	Culling *culling.Decision
	// Deferred: a template change waits for a busy kernel. Applied: a
	// pending template change is applied now. AwaitingProbe: a template
	// change waits for the probe's answer to know whether a kernel is busy.
	Deferred, Applied, AwaitingProbe bool
	// RequeueAfter is when to look again, zero for not at all.
	RequeueAfter time.Duration
}

// DecisionKeys are the StatefulSet annotations that record decisions.
var DecisionKeys = []string{
	render.AnnotationStartedAt, render.AnnotationCulled, render.AnnotationCulledAt,
	render.AnnotationRestartHandled, render.AnnotationForceUpdateHandled,
}

// decisions run in order, each reading what the earlier ones decided.
var decisions = []func(Input, *Outcome){
	RestartAfterCull, SuspendEndsCull, Start, Cull, Recheck, TemplateChange,
}

// Decide runs the decisions.
func Decide(in Input) Outcome {
	out := Outcome{Annotations: Recorded(in)}
	for _, decide := range decisions {
		decide(in, &out)
	}
	return out
}

// Recorded are the decisions the StatefulSet records. Requests made before
// the Notebook first ran are not pending.
func Recorded(in Input) map[string]string {
	ann := map[string]string{}
	if !in.Exists {
		ann[render.AnnotationRestartHandled] = in.RestartRequest
		ann[render.AnnotationForceUpdateHandled] = in.ForceRequest
		return ann
	}
	for _, k := range DecisionKeys {
		if v, ok := in.Recorded[k]; ok {
			ann[k] = v
		}
	}
	return ann
}

// RestartAfterCull ends a cull when the user asks for a restart made
// after the last one handled.
func RestartAfterCull(in Input, out *Outcome) {
	ann := out.Annotations
	if ann[render.AnnotationCulled] == "" || in.RestartRequest == "" || in.RestartRequest == ann[render.AnnotationRestartHandled] {
		return
	}
	out.Restarted = true
	endCull(in, out)
	ann[render.AnnotationRestartHandled] = in.RestartRequest
}

// SuspendEndsCull ends a cull when the Notebook is suspended: suspending
// supersedes a cull, since resuming is itself the user's request to run
// again.
func SuspendEndsCull(in Input, out *Outcome) {
	if in.Suspend && out.Annotations[render.AnnotationCulled] != "" {
		endCull(in, out)
	}
	out.Culled = out.Annotations[render.AnnotationCulled]
}

func endCull(in Input, out *Outcome) {
	out.WasCulledFor = culledFor(out.Annotations, in.Now)
	delete(out.Annotations, render.AnnotationCulled)
	delete(out.Annotations, render.AnnotationCulledAt)
}

func culledFor(ann map[string]string, now time.Time) time.Duration {
	at, err := time.Parse(time.RFC3339, ann[render.AnnotationCulledAt])
	if err != nil {
		return 0
	}
	return now.Sub(at)
}

// Start runs the server unless it is suspended or culled, and records when
// a stopped server starts.
func Start(in Input, out *Outcome) {
	out.Replicas = 1
	if in.Suspend || out.Culled != "" {
		out.Replicas = 0
	}
	if out.Replicas == 1 && in.WasStopped {
		out.Annotations[render.AnnotationStartedAt] = in.Now.UTC().Format(time.RFC3339)
	}
}

// Cull asks the culling policy about a server that keeps running; a cull
// stops it and records why and when. While a probe is pending nothing is
// decided, not even the end of the lifetime: an old answer may miss the
// activity since, and the pending answer comes within the probe's timeout.
func Cull(in Input, out *Outcome) {
	probeOK := in.Probe != nil && in.Probe.OK()
	switch {
	case out.Replicas != 1, in.ProbePending:
		return
	case !in.WasStopped && in.Policy.Active():
		d := culling.Decide(culling.Input{Now: in.Now, Policy: in.Policy, StartedAt: startedAt(out.Annotations), Activity: activity(in), Warned: in.Warned})
		out.Culling = &d
		if d.Action != culling.Cull {
			out.RequeueAfter = d.NextCheck
			return
		}
		out.JustCulled, out.Culled, out.Replicas = true, d.Reason, 0
		out.Annotations[render.AnnotationCulled] = d.Reason
		out.Annotations[render.AnnotationCulledAt] = in.Now.UTC().Format(time.RFC3339)
		// A restart request standing at the time of the cull is old.
		out.Annotations[render.AnnotationRestartHandled] = in.RestartRequest
	case probeOK:
		out.Culling = &culling.Decision{Action: culling.None, LastActivity: probeActivity(in)}
		// Without culling nothing else brings the operator back while the
		// server runs (Jupyter sends no event when a kernel works), and the
		// reported activity would stay at the last event's.
		out.RequeueAfter = sooner(out.RequeueAfter, in.ReportInterval)
	}
}

func startedAt(ann map[string]string) time.Time {
	t, _ := time.Parse(time.RFC3339, ann[render.AnnotationStartedAt])
	return t
}

func activity(in Input) culling.Activity {
	if in.Probe == nil || !in.Probe.OK() {
		return culling.Activity{}
	}
	return culling.Activity{OK: true, Last: in.Probe.LastActivity, Busy: in.Probe.Busy}
}

func probeActivity(in Input) time.Time {
	if in.Probe.Busy {
		return in.Now.Truncate(time.Second)
	}
	return in.Probe.LastActivity.Truncate(time.Second)
}

// Recheck looks again soon at a running server that did not answer its
// probe, or was not probed for want of its token. A pending probe needs no
// timer: its answer brings the Notebook back.
func Recheck(in Input, out *Outcome) {
	if !in.Running || out.Replicas != 1 {
		return
	}
	switch {
	case in.ProbePending:
		// Its answer brings the Notebook back.
	case in.Probe == nil:
		out.RequeueAfter = sooner(out.RequeueAfter, retryNoToken)
	case !in.Probe.OK():
		out.RequeueAfter = sooner(out.RequeueAfter, min(RetryNotAnswering, max(in.Policy.CheckPeriod, time.Second)))
	}
}

// TemplateChange applies a change of the running server's template, unless
// a kernel is busy: then it waits, unless the user forces it. The latest
// answer saying busy keeps it waiting even while a newer one is pending;
// any other waits for the pending one.
func TemplateChange(in Input, out *Outcome) {
	if out.Replicas != 1 || !in.Running || !in.Exists || !in.TemplateChanged {
		return
	}
	forced := in.ForceRequest != "" && in.ForceRequest != out.Annotations[render.AnnotationForceUpdateHandled]
	switch {
	case forced:
		out.Annotations[render.AnnotationForceUpdateHandled] = in.ForceRequest
		out.Applied = true
	case in.Probe != nil && in.Probe.OK() && in.Probe.Busy:
		out.Deferred = true
		out.RequeueAfter = sooner(out.RequeueAfter, in.Policy.CheckPeriod)
	case in.ProbePending:
		out.AwaitingProbe = true
	default:
		out.Applied = true
	}
}

// sooner is the earlier of two requeues, zero meaning none.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
