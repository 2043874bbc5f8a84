package sample

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestOneStatusWriteToBecomeReady: the Runner writes status once per
// reconcile, so a new Widget costs one metadata patch (the finalizer) and
// one status patch on its way to Ready.
func TestOneStatusWriteToBecomeReady(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "skeleton")
	op := startOperator(t, NewExternal(), nil)

	w := newWidget(ns, "hello")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, w)
	writes := op.Writes.Namespace(ns)
	writes.WaitQuiet(t, 3*time.Second)
	if n := writes.Count("patch", "widgets/status"); n != 1 {
		t.Errorf("status patches to become Ready = %d, want 1: %s", n, writes)
	}
	if n := writes.Count("patch", "widgets"); n != 1 {
		t.Errorf("metadata patches = %d, want 1 (the finalizer): %s", n, writes)
	}
}

// TestFailingPhaseDoesNotStopTheOthers: when provision fails, the echo phase
// still reports what the external system holds, and the status records the
// failure for the new generation.
func TestFailingPhaseDoesNotStopTheOthers(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "skeleton")
	ext := NewExternal()
	startOperator(t, ext, nil)

	w := newWidget(ns, "one")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	w = waitReady(t, c, w)
	// Someone changes the record outside, and the system then refuses
	// writes; a spec change makes the operator try to put "two".
	if err := ext.Put(string(w.UID), "outside"); err != nil {
		t.Fatal(err)
	}
	ext.SetFailing(true)
	w.Spec.Message = "two"
	if err := c.Update(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the failure recorded and the held message echoed", func(ctx context.Context) (bool, error) {
		got, err := getWidget(ctx, c, w)
		if err != nil {
			return false, err
		}
		ready := conditions.Get(got, commonv1alpha1.ConditionReady)
		return got.Status.ObservedGeneration == got.Generation && got.Status.Echo == "outside" &&
			ready != nil && ready.Reason == ReasonExternalUnavailable, nil
	})
	testenv.WaitForEvent(t, c, w, ReasonExternalUnavailable)

	ext.SetFailing(false)
	got := waitReady(t, c, w)
	if got.Status.Echo != "two" {
		t.Errorf("echo = %q after recovery, want two", got.Status.Echo)
	}
}

// TestLastingFailureIsAWarningEvent: a phase that keeps failing reaches
// the Widget as a Warning event ReconcileError with the phase's error, on a
// real API server through the operator's event recorder; the Widget is
// Ready again once the external system serves.
func TestLastingFailureIsAWarningEvent(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "lasting")
	ext := NewExternal()
	ext.SetFailing(true)
	startOperator(t, ext, func(r *Reconciler) { r.ErrorEventAfter = time.Second })

	w := newWidget(ns, "one")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	e := testenv.WaitForEvent(t, c, w, phase.ReasonReconcileError)
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "provision: ") || !strings.HasPrefix(e.Message, "Reconciling has failed for ") {
		t.Errorf("event %s %q: want a Warning naming the failing phase", e.Type, e.Message)
	}
	ext.SetFailing(false)
	waitReady(t, c, w)
}
