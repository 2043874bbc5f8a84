package phase

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
)

// journal records status writes and events in the order they happen.
type journal struct {
	mu      sync.Mutex
	entries []string
	// messages are the events' messages, in order.
	messages []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, s)
}

func (j *journal) count(prefix string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.entries {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// recorder is an EventRecorder writing into a journal.
type recorder struct{ j *journal }

func (r recorder) Event(_ runtime.Object, eventtype, reason, message string) {
	r.j.add("event " + eventtype + " " + reason)
	r.j.mu.Lock()
	defer r.j.mu.Unlock()
	r.j.messages = append(r.j.messages, message)
}

func (r recorder) Eventf(o runtime.Object, eventtype, reason, messageFmt string, _ ...any) {
	r.Event(o, eventtype, reason, messageFmt)
}

func (r recorder) AnnotatedEventf(o runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, _ ...any) {
	r.Event(o, eventtype, reason, messageFmt)
}

type fixture struct {
	client client.Client
	j      *journal
	widget *samplev1alpha1.Widget
	clock  *clocktesting.FakeClock
	reg    *prometheus.Registry
	// failStatus makes every status write fail.
	failStatus bool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := samplev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	w := &samplev1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", Generation: 3}}
	f := &fixture{j: &journal{}, clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), reg: prometheus.NewRegistry()}
	f.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(w).WithStatusSubresource(w).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if f.failStatus {
					return errors.New("injected status write failure")
				}
				f.j.add("status-write")
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	f.widget = f.get(t)
	return f
}

func (f *fixture) get(t *testing.T) *samplev1alpha1.Widget {
	t.Helper()
	w := &samplev1alpha1.Widget{}
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "w"}, w); err != nil {
		t.Fatal(err)
	}
	return w
}

func (f *fixture) runner(t *testing.T, phases ...Phase[*samplev1alpha1.Widget]) *Runner[*samplev1alpha1.Widget, *samplev1alpha1.Widget] {
	t.Helper()
	m, err := NewMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	return &Runner[*samplev1alpha1.Widget, *samplev1alpha1.Widget]{
		Controller: "widget",
		Client:     f.client,
		APIReader:  f.client,
		Recorder:   recorder{f.j},
		Clock:      f.clock,
		Metrics:    m,
		Phases:     phases,
		ObservedGeneration: func(w *samplev1alpha1.Widget) *int64 {
			return &w.Status.ObservedGeneration
		},
	}
}

type W = *samplev1alpha1.Widget

// run reconciles the Widget as stored, the Widget being its own scope.
func (f *fixture) run(r *Runner[W, W]) (ctrl.Result, error) {
	w := &samplev1alpha1.Widget{}
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "w"}, w); err != nil {
		return ctrl.Result{}, err
	}
	return r.Run(context.Background(), w, w)
}

func ready(_ context.Context, w W) (Result, error) {
	conditions.MarkReady(w, commonv1alpha1.ReasonReconciled, "fine")
	return Result{}, nil
}

func echo(_ context.Context, w W) (Result, error) {
	w.Status.Echo = "echoed"
	return Result{}, nil
}

func TestRunAggregatesErrorsAndRunsLaterPhases(t *testing.T) {
	f := newFixture(t)
	errA, errB := errors.New("a broke"), errors.New("b broke")
	r := f.runner(t,
		Phase[W]{Name: "a", Run: func(context.Context, W) (Result, error) { return Result{RequeueAfter: time.Minute}, errA }},
		Phase[W]{Name: "echo", Run: echo},
		Phase[W]{Name: "b", Run: func(context.Context, W) (Result, error) { return Result{}, errB }},
	)
	res, err := r.Run(context.Background(), f.widget, f.widget)
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Fatalf("want both phase errors joined, got %v", err)
	}
	if !strings.Contains(err.Error(), "a: a broke") || !strings.Contains(err.Error(), "b: b broke") {
		t.Errorf("errors should name their phase: %v", err)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("an error must not come with a RequeueAfter, got %v", res.RequeueAfter)
	}
	got := f.get(t)
	if got.Status.Echo != "echoed" {
		t.Errorf("the phase after a failing one did not take effect: %+v", got.Status)
	}
	if got.Status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d, want 3", got.Status.ObservedGeneration)
	}
}

func TestRunKeepsShortestNonZeroRequeue(t *testing.T) {
	f := newFixture(t)
	after := func(d time.Duration) Phase[W] {
		return Phase[W]{Name: d.String(), Run: func(context.Context, W) (Result, error) { return Result{RequeueAfter: d}, nil }}
	}
	r := f.runner(t, after(0), after(5*time.Minute), after(0), after(30*time.Second), after(2*time.Minute))
	res, err := r.Run(context.Background(), f.widget, f.widget)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 30*time.Second {
		t.Errorf("RequeueAfter = %v, want 30s", res.RequeueAfter)
	}
}

func TestRunStops(t *testing.T) {
	stalled := func(_ context.Context, w W) (Result, error) {
		conditions.MarkStalled(w, commonv1alpha1.ReasonInvalidSpec, "bad")
		return Result{}, nil
	}
	stop := func(context.Context, W) (Result, error) { return Result{Stop: true}, nil }
	for _, tc := range []struct {
		name       string
		first      Phase[W]
		wantEchoed bool
	}{
		{"explicit stop", Phase[W]{Name: "stop", Run: stop}, false},
		{"stalled where asked", Phase[W]{Name: "stall", Run: stalled, StopIfStalled: true}, false},
		{"stalled where not asked", Phase[W]{Name: "stall", Run: stalled}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			r := f.runner(t, tc.first, Phase[W]{Name: "echo", Run: echo})
			if _, err := r.Run(context.Background(), f.widget, f.widget); err != nil {
				t.Fatal(err)
			}
			got := f.get(t)
			if echoed := got.Status.Echo == "echoed"; echoed != tc.wantEchoed {
				t.Errorf("later phase ran = %v, want %v", echoed, tc.wantEchoed)
			}
			if got.Status.ObservedGeneration != 3 {
				t.Errorf("status was not written on stop: %+v", got.Status)
			}
		})
	}
}

func TestRunWritesStatusOnceAndOnlyWhenChanged(t *testing.T) {
	f := newFixture(t)
	r := f.runner(t, Phase[W]{Name: "ready", Run: ready}, Phase[W]{Name: "echo", Run: echo})
	if _, err := r.Run(context.Background(), f.widget, f.widget); err != nil {
		t.Fatal(err)
	}
	if n := f.j.count("status-write"); n != 1 {
		t.Fatalf("status writes = %d, want 1", n)
	}
	if _, err := f.run(r); err != nil {
		t.Fatal(err)
	}
	if n := f.j.count("status-write"); n != 1 {
		t.Errorf("a reconcile that changed nothing wrote status: %d writes", n)
	}
}

func TestEventsFollowTheStatusWrite(t *testing.T) {
	f := newFixture(t)
	r := f.runner(t, Phase[W]{Name: "ready", Run: ready})
	if _, err := r.Run(context.Background(), f.widget, f.widget); err != nil {
		t.Fatal(err)
	}
	want := []string{"status-write", "event Normal Ready"}
	if strings.Join(f.j.entries, "|") != strings.Join(want, "|") {
		t.Errorf("journal = %v, want %v", f.j.entries, want)
	}
}

func TestNoEventWhenStatusWriteFails(t *testing.T) {
	f := newFixture(t)
	f.failStatus = true
	r := f.runner(t, Phase[W]{Name: "ready", Run: ready})
	if _, err := r.Run(context.Background(), f.widget, f.widget); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("want the status write error, got %v", err)
	}
	if n := f.j.count("event"); n != 0 {
		t.Errorf("events recorded although status was not written: %v", f.j.entries)
	}
}

func TestNoEventWithoutTransition(t *testing.T) {
	f := newFixture(t)
	r := f.runner(t, Phase[W]{Name: "ready", Run: ready})
	if _, err := r.Run(context.Background(), f.widget, f.widget); err != nil {
		t.Fatal(err)
	}
	// Same status, new message and a changed field: a write but no
	// transition.
	r.Phases = []Phase[W]{{Name: "ready", Run: func(_ context.Context, w W) (Result, error) {
		conditions.MarkReady(w, commonv1alpha1.ReasonReconciled, "still fine")
		w.Status.Echo = "changed"
		return Result{}, nil
	}}}
	if _, err := f.run(r); err != nil {
		t.Fatal(err)
	}
	if n := f.j.count("status-write"); n != 2 {
		t.Fatalf("status writes = %d, want 2", n)
	}
	if n := f.j.count("event"); n != 1 {
		t.Errorf("events = %v, want only the first Ready", f.j.entries)
	}
}

func TestEventsReplaceTheTransitions(t *testing.T) {
	f := newFixture(t)
	r := f.runner(t, Phase[W]{Name: "ready", Run: ready})
	r.Events = func(W, W, W) []Event { return nil }
	if _, err := r.Run(context.Background(), f.widget, f.widget); err != nil {
		t.Fatal(err)
	}
	if f.j.count("status-write") != 1 || f.j.count("event") != 0 {
		t.Errorf("journal = %v, want one status write and no event", f.j.entries)
	}
}

func TestPhaseDurationHistogram(t *testing.T) {
	f := newFixture(t)
	slow := func(context.Context, W) (Result, error) {
		f.clock.Step(2 * time.Second)
		return Result{}, nil
	}
	r := f.runner(t, Phase[W]{Name: "slow", Run: slow}, Phase[W]{Name: "ready", Run: ready})
	if _, err := r.Run(context.Background(), f.widget, f.widget); err != nil {
		t.Fatal(err)
	}
	got := histograms(t, f.reg, "mlplatform_reconcile_phase_duration_seconds")
	if h := got["widget/slow"]; h == nil || h.GetSampleCount() != 1 || h.GetSampleSum() != 2 {
		t.Errorf("slow phase histogram = %v, want one sample of 2s", h)
	}
	if h := got["widget/ready"]; h == nil || h.GetSampleCount() != 1 || h.GetSampleSum() != 0 {
		t.Errorf("ready phase histogram = %v, want one sample of 0s", h)
	}
	// A second set of metrics on the same registry shares the collector.
	if _, err := NewMetrics(f.reg); err != nil {
		t.Errorf("NewMetrics on a registry that has it: %v", err)
	}
}

func histograms(t *testing.T, reg *prometheus.Registry, name string) map[string]*dto.Histogram {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Histogram{}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["controller"]+"/"+labels["phase"]] = m.GetHistogram()
		}
	}
	return out
}

func TestTransitionsRule(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: "m"}
	}
	before := []metav1.Condition{
		cond(commonv1alpha1.ConditionReady, metav1.ConditionFalse, commonv1alpha1.ReasonProgressing),
		cond("Extra", metav1.ConditionFalse, "Broken"),
	}
	after := []metav1.Condition{
		cond(commonv1alpha1.ConditionReady, metav1.ConditionFalse, "ExternalUnavailable"),
		cond(commonv1alpha1.ConditionStalled, metav1.ConditionTrue, "ExternalUnavailable"),
		cond("Extra", metav1.ConditionFalse, "Broken"),
		cond("Waiting", metav1.ConditionFalse, "WaitingForServer"),
		cond(commonv1alpha1.ConditionFailed, metav1.ConditionTrue, "BackoffLimitExceeded"),
		cond(commonv1alpha1.ConditionSucceeded, metav1.ConditionFalse, "BackoffLimitExceeded"),
	}
	got := Transitions("WaitingForServer")(before, after)
	want := []Event{
		{corev1.EventTypeWarning, "ExternalUnavailable", "m"},
		{corev1.EventTypeNormal, "WaitingForServer", "m"},
		{corev1.EventTypeWarning, "BackoffLimitExceeded", "m"},
	}
	if len(got) != len(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestAfterWriteSeesBeforeAndAfter(t *testing.T) {
	f := newFixture(t)
	r := f.runner(t, Phase[W]{Name: "ready", Run: ready})
	var calls []string
	r.AfterWrite = func(_, before, after W, statusWritten bool) {
		calls = append(calls, fmt.Sprintf("%v->%v written=%v",
			conditions.IsTrue(before, commonv1alpha1.ConditionReady), conditions.IsTrue(after, commonv1alpha1.ConditionReady), statusWritten))
	}
	for range 2 {
		w := f.get(t)
		if _, err := r.Run(context.Background(), w, w); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"false->true written=true", "true->true written=false"}
	if strings.Join(calls, "|") != strings.Join(want, "|") {
		t.Errorf("AfterWrite calls = %v, want %v", calls, want)
	}
	f.failStatus = true
	w := f.get(t)
	r.Phases = []Phase[W]{{Name: "echo", Run: echo}}
	if _, err := r.Run(context.Background(), w, w); err == nil {
		t.Fatal("want the injected status write error")
	}
	if len(calls) != 2 {
		t.Errorf("AfterWrite ran although the write failed: %v", calls)
	}
}

// TestHaltSkipsStepsButNotTheStatus: once Halt says the later steps lack
// what they need, they are skipped; a phase marked Always (the status)
// still runs, and the halting step's error is returned.
func TestHaltSkipsStepsButNotTheStatus(t *testing.T) {
	type scope struct {
		w    W
		seen []string
	}
	boom := errors.New("boom")
	step := func(name string, err error) Phase[*scope] {
		return Step(name, func(_ context.Context, s *scope) (ctrl.Result, error) {
			s.seen = append(s.seen, name)
			return ctrl.Result{RequeueAfter: time.Minute}, err
		})
	}
	for name, tc := range map[string]struct {
		halt     func(*scope, error) bool
		wantSeen string
		wantErr  error
	}{
		"halting on an error":  {halt: func(_ *scope, err error) bool { return err != nil }, wantSeen: "first,second,status", wantErr: boom},
		"never halting":        {halt: nil, wantSeen: "first,second,third,status", wantErr: boom},
		"halting on the scope": {halt: func(s *scope, _ error) bool { return len(s.seen) == 1 }, wantSeen: "first,status"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			r := &Runner[W, *scope]{
				Client: f.client, APIReader: f.client, Recorder: recorder{f.j}, Clock: f.clock,
				Phases: []Phase[*scope]{
					step("first", nil), step("second", boom), step("third", nil),
					{Name: "status", Always: true, Run: func(_ context.Context, s *scope) (Result, error) {
						s.seen = append(s.seen, "status")
						s.w.Status.Echo = "computed"
						return Result{}, nil
					}},
				},
				ObservedGeneration: func(s *scope) *int64 { return &s.w.Status.ObservedGeneration },
				Halt:               tc.halt,
			}
			s := &scope{w: f.widget}
			res, err := r.Run(context.Background(), f.widget, s)
			if strings.Join(s.seen, ",") != tc.wantSeen {
				t.Errorf("phases run = %v, want %s", s.seen, tc.wantSeen)
			}
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("Run = %+v, %v; want error %v", res, err, tc.wantErr)
			}
			if got := f.get(t); got.Status.Echo != "computed" || got.Status.ObservedGeneration != 3 {
				t.Errorf("status = %+v, want the status phase's and observedGeneration 3", got.Status)
			}
		})
	}
}

// TestEventsSeeTheScope: a controller's own events come from what the
// reconcile learned, after the write, through the one Events path.
func TestEventsSeeTheScope(t *testing.T) {
	f := newFixture(t)
	r := f.runner(t, Phase[W]{Name: "echo", Run: echo})
	r.Events = func(s, before, after W) []Event {
		return []Event{{Type: corev1.EventTypeNormal, Reason: "Echoed", Message: before.Status.Echo + "->" + after.Status.Echo}}
	}
	if _, err := f.run(r); err != nil {
		t.Fatal(err)
	}
	want := []string{"status-write", "event Normal Echoed"}
	if strings.Join(f.j.entries, "|") != strings.Join(want, "|") {
		t.Errorf("journal = %v, want %v", f.j.entries, want)
	}
}

// TestLastingErrorsBecomeWarningEvents: an error the phases keep returning
// is reported once as a Warning event after ErrorEventAfter, again only
// when it changes, and forgotten after a success; conflicts and an
// unreachable API server never start the clock, and a long message is cut
// to what the API server takes.
func TestLastingErrorsBecomeWarningEvents(t *testing.T) {
	f := newFixture(t)
	var failure error
	r := f.runner(t, Phase[W]{Name: "ensureService", Run: func(context.Context, W) (Result, error) { return Result{}, failure }})
	warnings := func() int { return f.j.count("event Warning " + ReasonReconcileError) }
	step := func(d time.Duration) {
		t.Helper()
		f.clock.Step(d)
		if _, err := f.run(r); (err != nil) != (failure != nil) {
			t.Fatalf("Run returned %v with the phase failing with %v", err, failure)
		}
	}

	for _, passing := range []error{
		apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "w", errors.New("changed")),
		apierrors.NewServiceUnavailable("the API server is restarting"),
		fmt.Errorf("get: %w", syscall.ECONNREFUSED),
	} {
		failure = passing
		step(0)
		step(DefaultErrorEventAfter)
	}
	failure = apierrors.NewInternalError(errors.New("failed to allocate a serviceIP: range is full"))
	step(time.Second) // the clock starts here: conflicts did not start it
	step(DefaultErrorEventAfter - 2*time.Second)
	if n := warnings(); n != 0 {
		t.Fatalf("%d Warning events before the error lasted %s", n, DefaultErrorEventAfter)
	}
	step(2 * time.Second)
	step(10 * time.Second)
	if n := warnings(); n != 1 {
		t.Fatalf("%d Warning events after the error lasted, want one for the same error", n)
	}
	if msg := f.j.messages[len(f.j.messages)-1]; !strings.Contains(msg, "ensureService: Internal error occurred: failed to allocate a serviceIP: range is full") || !strings.HasPrefix(msg, "Reconciling has failed for 30s: ") {
		t.Errorf("event message %q: want how long and the phase's error", msg)
	}

	failure = errors.New(strings.Repeat("é", maxEventMessage))
	step(time.Second)
	if n := warnings(); n != 2 {
		t.Fatalf("%d Warning events after the error changed, want 2", n)
	}
	if msg := f.j.messages[len(f.j.messages)-1]; len(msg) > maxEventMessage || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "...") {
		t.Errorf("a long message was sent as %d bytes (valid UTF-8: %v)", len(msg), utf8.ValidString(msg))
	}

	failure = nil
	step(time.Second)
	failure = errors.New("forbidden")
	step(time.Second)
	step(DefaultErrorEventAfter - time.Second)
	if n := warnings(); n != 2 {
		t.Errorf("%d Warning events: a success did not restart the clock", n)
	}
	step(time.Second)
	if n := warnings(); n != 3 {
		t.Errorf("%d Warning events, want 3 once the new failure lasted", n)
	}

	off := f.runner(t, Phase[W]{Name: "failing", Run: func(context.Context, W) (Result, error) { return Result{}, errors.New("down") }})
	off.ErrorEventAfter = -1
	for range 3 {
		f.clock.Step(time.Hour)
		_, _ = f.run(off)
	}
	if n := warnings(); n != 3 {
		t.Errorf("%d Warning events with the events turned off, want still 3", n)
	}
}

// TestLastingErrorsTrackABoundedNumberOfObjects: objects deleted while they
// failed are never reconciled again; the map of failing objects stops
// growing at maxFailingObjects.
func TestLastingErrorsTrackABoundedNumberOfObjects(t *testing.T) {
	r := &Runner[W, W]{Recorder: recorder{&journal{}}, Clock: clocktesting.NewFakeClock(time.Unix(1000, 0))}
	for i := range maxFailingObjects + 10 {
		r.reportLastingError(&samplev1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(i)}}, errors.New("down"))
	}
	if n := len(r.failing.objects); n != maxFailingObjects {
		t.Errorf("%d failing objects tracked, want at most %d", n, maxFailingObjects)
	}
	if n := r.failing.order.Len(); n != maxFailingObjects {
		t.Errorf("%d failing objects in order, want %d", n, maxFailingObjects)
	}
	r.reportLastingError(&samplev1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(maxFailingObjects + 9)}}, nil)
	if n := len(r.failing.objects); n != maxFailingObjects-1 {
		t.Errorf("%d failing objects tracked after one succeeded, want %d", n, maxFailingObjects-1)
	}
}

// TestLastingErrorsOfNewObjectsAreReportedWhenTheTrackIsFull: objects
// deleted while they failed are never reconciled again to end their
// entries; once maxFailingObjects of them have piled up, a new object that
// keeps failing must still get its Warning event, and so must an object
// that failed before them and still fails: the entry forgotten is the one
// that failed least recently.
func TestLastingErrorsOfNewObjectsAreReportedWhenTheTrackIsFull(t *testing.T) {
	j := &journal{}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	r := &Runner[W, W]{Recorder: recorder{j}, Clock: clk}
	widget := func(name string) W {
		return &samplev1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	}
	steady, fresh := widget("steady"), widget("new")
	r.reportLastingError(steady, errors.New("forbidden"))
	for i := range maxFailingObjects - 1 {
		r.reportLastingError(widget(fmt.Sprint("deleted-", i)), errors.New("down"))
	}
	clk.Step(10 * time.Second)
	r.reportLastingError(steady, errors.New("forbidden"))
	r.reportLastingError(fresh, errors.New("forbidden"))
	clk.Step(DefaultErrorEventAfter)
	r.reportLastingError(steady, errors.New("forbidden"))
	r.reportLastingError(fresh, errors.New("forbidden"))
	if n := j.count("event Warning " + ReasonReconcileError); n != 2 {
		t.Errorf("%d Warning events for two objects failing for %v or longer beside %d stale entries, want 2", n, DefaultErrorEventAfter, maxFailingObjects-1)
	}
}
