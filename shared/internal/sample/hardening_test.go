package sample

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
	"github.com/ml-platform/ml-platform/shared/panics"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// A cleanup that could not reach what it needs must keep the finalizer,
// even when the error it returns is a Kubernetes NotFound: only the absence
// of the external resource itself means done, and the cleanup says that by
// returning nil.
func TestCleanupFailingOnAMissingDependencyKeepsTheFinalizer(t *testing.T) {
	secretNotFound := apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "admin")
	cases := map[string]struct {
		err        error
		wantReason string
	}{
		"a NotFound of something the cleanup reads": {
			err: fmt.Errorf("reading the admin Secret: %w", secretNotFound), wantReason: commonv1alpha1.ReasonCleanupError,
		},
		"a dependency marked with MissingDependency": {
			err:        finalizer.MissingDependency("admin Secret ns/admin", secretNotFound),
			wantReason: commonv1alpha1.ReasonCleanupDependencyMissing,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := env.AdminClient(t, scheme)
			ns := testenv.CreateNamespace(t, c, "sample")
			ext := NewExternal()
			startOperator(t, ext, nil)
			w := newWidget(ns, "dep")
			if err := c.Create(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			w = waitReady(t, c, w)

			ext.FailWith(tc.err)
			if err := c.Delete(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "CleanupFailed with reason "+tc.wantReason+" and the finalizer kept", func(ctx context.Context) (bool, error) {
				got, err := getWidget(ctx, c, w)
				if err != nil {
					return false, err
				}
				cond := conditions.Get(got, commonv1alpha1.ConditionCleanupFailed)
				return controllerutil.ContainsFinalizer(got, FinalizerName) && cond != nil &&
					cond.Status == metav1.ConditionTrue && cond.Reason == tc.wantReason, nil
			})
			testenv.WaitForEvent(t, c, w, finalizer.EventCleanupFailed)
			if _, ok := ext.Get(string(w.UID)); !ok {
				t.Fatal("the external record is gone although cleanup never ran")
			}

			ext.FailWith(nil)
			testenv.WaitGone(t, c, w)
			if _, ok := ext.Get(string(w.UID)); ok {
				t.Fatal("external record left behind once the dependency was back")
			}
		})
	}
}

// In a terminating namespace the finalizer goes only once the hand-off
// succeeded: a failing hand-off keeps the object (and so the namespace)
// until it works, because releasing it would lose the only record of what
// must still be removed.
func TestTerminatingNamespaceReleasesOnlyAfterTheHandoffSucceeded(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	ext := NewExternal()
	var attempts, handedOff atomic.Int32
	var handoffWorks atomic.Bool
	startOperator(t, ext, func(r *Reconciler) {
		r.Finalizer.NamespaceGrace = time.Second
		r.Finalizer.Handoff = func(context.Context, finalizer.Object, error) error {
			attempts.Add(1)
			if !handoffWorks.Load() {
				return errors.New("the hand-off store refuses writes")
			}
			handedOff.Add(1)
			return nil
		}
	})
	w := newWidget(ns, "handoff")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	w = waitReady(t, c, w)
	ext.SetFailing(true)
	if err := c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// Three failed hand-offs prove the release path ran past the grace
	// period more than once; the widget must have outlived each of them.
	testenv.Eventually(t, "three failed hand-offs", func(context.Context) (bool, error) {
		return attempts.Load() >= 3, nil
	})
	got, err := getWidget(t.Context(), c, w)
	if err != nil {
		t.Fatalf("the widget went although its hand-off failed: %v", err)
	}
	if !controllerutil.ContainsFinalizer(got, FinalizerName) {
		t.Fatalf("finalizer released after a failed hand-off: %v", got.Finalizers)
	}
	if handedOff.Load() != 0 {
		t.Fatal("hand-off recorded as done while it failed")
	}

	handoffWorks.Store(true)
	testenv.Eventually(t, "namespace deletion completes", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), nil
	})
	if handedOff.Load() != 1 {
		t.Errorf("hand-off succeeded %d times, want once", handedOff.Load())
	}
}

// A panic in a reconcile shows on the object (Stalled, InternalError, an
// event) without the panic's value, which may hold a credential, and the
// reconcile is retried: once the cause is gone the object becomes Ready.
func TestPanicInReconcileIsReportedAndRetried(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	ext := NewExternal()
	const secret = "password=hunter2-panic-value"
	ext.SetPanicking(secret)
	panicsBefore := metricstest.Value(t, "mlplatform_reconcile_panics_total", map[string]string{"controller": "widget"})
	startOperator(t, ext, nil)

	w := newWidget(ns, "boom")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Stalled with reason InternalError", func(ctx context.Context) (bool, error) {
		got, err := getWidget(ctx, c, w)
		if err != nil {
			return false, err
		}
		stalled := conditions.Get(got, commonv1alpha1.ConditionStalled)
		return stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.Reason == commonv1alpha1.ReasonInternalError &&
			!conditions.IsTrue(got, commonv1alpha1.ConditionReady), nil
	})
	ev := testenv.WaitForEvent(t, c, w, panics.EventInternalError)
	if got := metricstest.Value(t, "mlplatform_reconcile_panics_total", map[string]string{"controller": "widget"}); got <= panicsBefore {
		t.Errorf("reconcile_panics_total = %v after a recovered panic, want more than %v", got, panicsBefore)
	}
	got, err := getWidget(t.Context(), c, w)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{
		"condition": conditions.Get(got, commonv1alpha1.ConditionStalled).Message,
		"event":     ev.Message,
		"logs":      testenv.Logs.String(),
	} {
		if strings.Contains(text, "hunter2") {
			t.Errorf("the panic's value reached the %s", what)
		}
	}
	if !strings.Contains(testenv.Logs.String(), "Recovered a panic in Reconcile") {
		t.Error("the recovered panic was not logged")
	}

	ext.SetPanicking("")
	got = waitReady(t, c, w)
	if conditions.Get(got, commonv1alpha1.ConditionStalled) != nil {
		t.Errorf("Stalled stayed after recovery: %+v", got.Status.Conditions)
	}
}
