package sample

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/metrics/metricstest"
	"github.com/ml-platform/ml-platform/shared/patch"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func newWidget(ns, message string) *samplev1alpha1.Widget {
	return &samplev1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "w-"},
		Spec:       samplev1alpha1.WidgetSpec{Message: message},
	}
}

func getWidget(ctx context.Context, c client.Client, w *samplev1alpha1.Widget) (*samplev1alpha1.Widget, error) {
	got := &samplev1alpha1.Widget{}
	err := c.Get(ctx, client.ObjectKeyFromObject(w), got)
	return got, err
}

func waitReady(t *testing.T, c client.Client, w *samplev1alpha1.Widget) *samplev1alpha1.Widget {
	t.Helper()
	var got *samplev1alpha1.Widget
	testenv.Eventually(t, "widget becomes Ready for its generation", func(ctx context.Context) (bool, error) {
		var err error
		got, err = getWidget(ctx, c, w)
		if err != nil {
			return false, err
		}
		return conditions.IsTrue(got, commonv1alpha1.ConditionReady) && conditions.IsCurrent(got, commonv1alpha1.ConditionReady) &&
			got.Status.ObservedGeneration == got.Generation, nil
	})
	return got
}

func TestSettledWidgetCostsNoWrites(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	ext := NewExternal()
	op := startOperator(t, ext, nil)

	w := newWidget(ns, "hello")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, c, w)
	if got.Status.Echo != "hello" || !controllerutil.ContainsFinalizer(got, FinalizerName) {
		t.Fatalf("unexpected widget: echo %q finalizers %v", got.Status.Echo, got.Finalizers)
	}
	testenv.WaitForEvent(t, c, got, "Ready")
	t.Logf("writes to settle one widget: %s", op.Writes.Namespace(ns))

	// Repeated reconciles of the unchanged object, from the warm cache.
	op.Writes.Reset()
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w)}
	for range 20 {
		if _, err := op.reconciler.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n := op.Writes.Namespace(ns).Total(); n != 0 {
		t.Fatalf("20 reconciles of a settled widget wrote %d times: %s", n, op.Writes.Namespace(ns))
	}

	// A restarted operator starts from a cold cache and reconciles every
	// widget once on its initial list; that must not write either.
	op.Stop(t)
	op2 := startOperator(t, ext, nil)
	for range 5 {
		if _, err := op2.reconciler.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	// The initial reconciles of the controller itself must not write
	// either, whenever they come.
	testenv.Consistently(t, "a restarted operator leaves a settled widget alone", 3*time.Second, func(context.Context) error {
		if n := op2.Writes.Namespace(ns).Total(); n != 0 {
			return fmt.Errorf("it wrote %d times: %s", n, op2.Writes.Namespace(ns))
		}
		return nil
	})
}

func TestConcurrentMetadataAndConditionsSurvive(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	w := newWidget(ns, "m")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	stale := w.DeepCopy()

	// Another client adds its own finalizer, label and annotation after we
	// read the object.
	theirs := w.DeepCopy()
	theirs.Finalizers = append(theirs.Finalizers, "other.example.com/keep")
	theirs.Labels = map[string]string{"team": "a"}
	theirs.Annotations = map[string]string{"note": "theirs"}
	if err := c.Update(t.Context(), theirs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		latest, err := getWidget(context.Background(), c, w)
		if err == nil {
			latest.Finalizers = nil
			_ = c.Update(context.Background(), latest)
		}
	})

	writes := testenv.NewWriteCounter()
	ours := testenv.NewClient(t, writes.Wrap(env.Config), scheme)
	f := &finalizer.Finalizer{Name: FinalizerName, Client: ours, APIReader: c}
	added, err := f.Ensure(t.Context(), stale)
	if err != nil || !added {
		t.Fatalf("Ensure from a stale copy: added=%v err=%v", added, err)
	}
	if n := writes.Count("patch", "widgets"); n != 2 {
		t.Errorf("want one conflicting and one successful patch, got %s", writes)
	}
	got, err := getWidget(t.Context(), c, w)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Finalizers, []string{"other.example.com/keep", FinalizerName}) {
		t.Errorf("finalizers = %v, want theirs and ours", got.Finalizers)
	}
	if got.Labels["team"] != "a" || got.Annotations["note"] != "theirs" {
		t.Errorf("their label or annotation was dropped: %v %v", got.Labels, got.Annotations)
	}

	// Another writer sets a condition of its own after we read the object;
	// our status write from the stale copy must keep it.
	stale = got.DeepCopy()
	other := got.DeepCopy()
	conditions.MarkTrue(other, "ExternalCheck", "Verified", "set by another controller")
	if err := c.Status().Update(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	writes.Reset()
	h, err := patch.NewHelper(stale, ours, c)
	if err != nil {
		t.Fatal(err)
	}
	conditions.MarkReady(stale, commonv1alpha1.ReasonReconciled, "")
	stale.Status.Echo = "m"
	if res, err := h.Patch(t.Context(), stale); err != nil || res.MetadataPatched || !res.StatusPatched {
		t.Fatalf("status-only patch: %+v %v", res, err)
	}
	if n := writes.Count("patch", "widgets/status"); n != 2 {
		t.Errorf("want one conflicting and one successful status patch, got %s", writes)
	}
	got, err = getWidget(t.Context(), c, w)
	if err != nil {
		t.Fatal(err)
	}
	if !conditions.IsTrue(got, "ExternalCheck") || !conditions.IsTrue(got, commonv1alpha1.ConditionReady) || got.Status.Echo != "m" {
		t.Errorf("conditions after our status write: %+v, echo %q; want theirs and ours", got.Status.Conditions, got.Status.Echo)
	}

	// Metadata from a stale copy, after another writer changed the object.
	stale = got.DeepCopy()
	theirs = got.DeepCopy()
	theirs.Labels["team"] = "b"
	if err := c.Update(t.Context(), theirs); err != nil {
		t.Fatal(err)
	}
	h, err = patch.NewHelper(stale, ours, c)
	if err != nil {
		t.Fatal(err)
	}
	controllerutil.RemoveFinalizer(stale, FinalizerName)
	stale.Labels["ours"] = "yes"
	if _, err := h.Patch(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	got, err = getWidget(t.Context(), c, w)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Finalizers, []string{"other.example.com/keep"}) || got.Labels["team"] != "b" || got.Labels["ours"] != "yes" {
		t.Errorf("metadata after our patch: finalizers %v labels %v", got.Finalizers, got.Labels)
	}

	// Unchanged objects cost no request at all.
	writes.Reset()
	h, _ = patch.NewHelper(got, ours, c)
	if res, err := h.Patch(t.Context(), got); err != nil || res.MetadataPatched || res.StatusPatched || writes.Total() != 0 {
		t.Errorf("patching an unchanged object: %+v %v, writes %s", res, err, writes)
	}
}

func TestFailingCleanupKeepsFinalizerThenStallsThenFinishes(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	ext := NewExternal()
	startOperator(t, ext, func(r *Reconciler) { r.Finalizer.Deadline = 3 * time.Second })

	w := newWidget(ns, "x")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	w = waitReady(t, c, w)
	if _, ok := ext.Get(string(w.UID)); !ok {
		t.Fatal("external record not provisioned")
	}

	failures := map[string]string{"finalizer": FinalizerName}
	failedBefore := metricstest.Value(t, "mlplatform_finalizer_cleanup_failures_total", failures)
	ext.SetFailing(true)
	if err := c.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "CleanupFailed condition while the finalizer stays", func(ctx context.Context) (bool, error) {
		got, err := getWidget(ctx, c, w)
		if err != nil {
			return false, err
		}
		cond := conditions.Get(got, commonv1alpha1.ConditionCleanupFailed)
		return controllerutil.ContainsFinalizer(got, FinalizerName) && cond != nil && cond.Status == metav1.ConditionTrue &&
			strings.Contains(cond.Message, ErrUnavailable.Error()), nil
	})
	testenv.WaitForEvent(t, c, w, finalizer.EventCleanupFailed)
	if got := metricstest.Value(t, "mlplatform_finalizer_cleanup_failures_total", failures); got <= failedBefore {
		t.Errorf("cleanup_failures_total = %v after a failed cleanup, want more than %v", got, failedBefore)
	}
	testenv.Eventually(t, "Stalled past the cleanup deadline", func(ctx context.Context) (bool, error) {
		got, err := getWidget(ctx, c, w)
		if err != nil {
			return false, err
		}
		stalled := conditions.Get(got, commonv1alpha1.ConditionStalled)
		return stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.Reason == commonv1alpha1.ReasonCleanupDeadlineExceeded &&
			strings.Contains(stalled.Message, "testing.mlplatform.dev/abandon-cleanup=true"), nil
	})

	ext.SetFailing(false)
	testenv.WaitGone(t, c, w)
	if _, ok := ext.Get(string(w.UID)); ok {
		t.Fatal("external record left behind")
	}
}

func TestCleanupTwiceIsHarmless(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	ext := NewExternal()
	w := newWidget(ns, "twice")
	w.Finalizers = []string{FinalizerName}
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if err := ext.Put(string(w.UID), "twice"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	deleting, err := getWidget(t.Context(), c, w)
	if err != nil {
		t.Fatal(err)
	}
	recorder := &recordingRecorder{}
	f := &finalizer.Finalizer{
		Name:      FinalizerName,
		Client:    c,
		APIReader: c,
		Recorder:  recorder,
		Cleanup:   (&Reconciler{External: ext}).cleanup,
	}
	// Two workers, or a retry after a lost response, can both finalize from
	// the same copy: the second run finds the record and the object gone.
	for i := range 2 {
		res, err := f.Finalize(t.Context(), deleting.DeepCopy())
		if err != nil || res.RequeueAfter != 0 {
			t.Fatalf("finalize #%d: %+v %v", i+1, res, err)
		}
	}
	testenv.WaitGone(t, c, w)
	if ext.Deletions() != 2 {
		t.Errorf("cleanup ran %d times, want 2", ext.Deletions())
	}
}

func TestAbandonAnnotationNeedsTheVerb(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	if err := applyManifests(t.Context(), c, filepath.Join(testenv.RepoRoot(), "deploy", "admission", "abandon-cleanup.yaml")); err != nil {
		t.Fatal(err)
	}
	// Tenants may edit widgets; admins may also abandon their cleanup.
	roles := []client.Object{
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "widget-editor"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{samplev1alpha1.GroupVersion.Group}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch", "update", "patch"}}},
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "widget-abandoner"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{samplev1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"abandon-cleanup"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "widget-editors"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "widget-editor"},
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"},
				{APIGroup: rbacv1.GroupName, Kind: "User", Name: "bob"},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "widget-abandoners"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "widget-abandoner"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "bob"}},
		},
	}
	for _, o := range roles {
		if err := c.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	aliceCfg, err := env.AddUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	bobCfg, err := env.AddUser("bob")
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := testenv.NewClient(t, aliceCfg, scheme), testenv.NewClient(t, bobCfg, scheme)

	ext := NewExternal()
	startOperator(t, ext, nil)
	w := newWidget(ns, "abandon")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	w = waitReady(t, c, w)
	ext.SetFailing(true)
	if err := c.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}

	key := "testing.mlplatform.dev/abandon-cleanup"
	setAnnotation := func(ctx context.Context, as client.Client, dryRun bool) error {
		got, err := getWidget(ctx, c, w)
		if err != nil {
			return err
		}
		p := client.MergeFrom(got.DeepCopy())
		metav1.SetMetaDataAnnotation(&got.ObjectMeta, key, "true")
		var opts []client.PatchOption
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		return as.Patch(ctx, got, p, opts...)
	}
	// The policy takes effect once the API server's informers see it.
	testenv.Eventually(t, "the admission policy refuses alice", func(ctx context.Context) (bool, error) {
		return apierrors.IsForbidden(setAnnotation(ctx, alice, true)), nil
	})
	err = setAnnotation(t.Context(), alice, false)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "abandon-cleanup") {
		t.Fatalf("alice setting %s: %v, want Forbidden naming the verb", key, err)
	}
	if got, err := getWidget(t.Context(), c, w); err != nil || !controllerutil.ContainsFinalizer(got, FinalizerName) {
		t.Fatalf("widget must still be held by its finalizer: %v", err)
	}

	abandoned := map[string]string{"finalizer": FinalizerName, "reason": "annotation"}
	abandonedBefore := metricstest.Value(t, "mlplatform_finalizer_cleanup_abandoned_total", abandoned)
	if err := setAnnotation(t.Context(), bob, false); err != nil {
		t.Fatalf("bob, allowed the verb, setting %s: %v", key, err)
	}
	testenv.WaitGone(t, c, w)
	testenv.WaitForEvent(t, c, w, finalizer.EventCleanupAbandoned)
	if got := metricstest.Value(t, "mlplatform_finalizer_cleanup_abandoned_total", abandoned); got != abandonedBefore+1 {
		t.Errorf("cleanup_abandoned_total{reason=annotation} = %v, want %v", got, abandonedBefore+1)
	}
	if _, ok := ext.Get(string(w.UID)); !ok {
		t.Error("abandoning cleanup must leave the external record alone")
	}
}

func TestNamespaceDeletionCompletesWhileCleanupFails(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	ext := NewExternal()
	var handedOff []string
	startOperator(t, ext, func(r *Reconciler) {
		r.Finalizer.NamespaceGrace = 2 * time.Second
		r.Finalizer.Handoff = func(_ context.Context, obj finalizer.Object, _ error) error {
			handedOff = append(handedOff, string(obj.GetUID()))
			return nil
		}
	})
	w := newWidget(ns, "ns")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	w = waitReady(t, c, w)
	ext.SetFailing(true)
	if err := c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "namespace deletion completes", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), nil
	})
	if !slices.Equal(handedOff, []string{string(w.UID)}) {
		t.Errorf("handed off %v, want the widget's cleanup handed off once", handedOff)
	}
}

func TestRecoversAfterAPIServerRestart(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	ext := NewExternal()
	startOperator(t, ext, nil)
	before := newWidget(ns, "before")
	if err := c.Create(t.Context(), before); err != nil {
		t.Fatal(err)
	}
	before = waitReady(t, c, before)

	if err := env.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}

	after := newWidget(ns, "after")
	testenv.Eventually(t, "create after the restart", func(ctx context.Context) (bool, error) {
		return c.Create(ctx, after) == nil, nil
	})
	waitReady(t, c, after)
	before.Spec.Message = "changed"
	testenv.Eventually(t, "update after the restart", func(ctx context.Context) (bool, error) {
		latest, err := getWidget(ctx, c, before)
		if err == nil {
			latest.Spec.Message = "changed"
			err = c.Update(ctx, latest)
		}
		// The apiserver may still be coming back: retry on any error.
		return err == nil, nil
	})
	got := waitReady(t, c, before)
	if got.Status.Echo != "changed" {
		t.Errorf("echo = %q after the restart, want changed", got.Status.Echo)
	}
}

// recordingRecorder keeps events in memory.
type recordingRecorder struct{ reasons []string }

func (r *recordingRecorder) Event(_ runtime.Object, _, reason, _ string) {
	r.reasons = append(r.reasons, reason)
}

func (r *recordingRecorder) Eventf(o runtime.Object, t, reason, _ string, _ ...any) {
	r.Event(o, t, reason, "")
}

func (r *recordingRecorder) AnnotatedEventf(o runtime.Object, _ map[string]string, t, reason, _ string, _ ...any) {
	r.Event(o, t, reason, "")
}

// TestCleanupDeadlineFollowsTheFinalizersClock finalizes a Widget whose
// cleanup fails with the finalizer's clock set just after the deletion and
// then past the deadline: only the second is Stalled, so the deadline is
// measured on Finalizer.Clock, not on the machine's clock.
func TestCleanupDeadlineFollowsTheFinalizersClock(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "sample")
	ext := NewExternal()
	w := newWidget(ns, "clocked")
	w.Finalizers = []string{FinalizerName}
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	deleting, err := getWidget(t.Context(), c, w)
	if err != nil {
		t.Fatal(err)
	}
	deleted := deleting.DeletionTimestamp.Time
	fake := clocktesting.NewFakePassiveClock(deleted.Add(time.Minute))
	f := &finalizer.Finalizer{Name: FinalizerName, Client: c, APIReader: c, Recorder: &recordingRecorder{},
		Cleanup: (&Reconciler{External: ext}).cleanup, Deadline: time.Hour, Clock: fake}
	ext.SetFailing(true)

	stalledAfter := func(at time.Time) (bool, ctrl.Result) {
		t.Helper()
		fake.SetTime(at)
		got, err := getWidget(t.Context(), c, w)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Finalize(t.Context(), got)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = getWidget(t.Context(), c, w); err != nil {
			t.Fatal(err)
		}
		return conditions.IsTrue(got, commonv1alpha1.ConditionStalled), res
	}
	if stalled, res := stalledAfter(deleted.Add(time.Minute)); stalled || res.RequeueAfter <= 0 || res.RequeueAfter > 59*time.Minute {
		t.Errorf("a minute after the deletion: stalled %v, requeue %s; want not stalled, a retry within the deadline", stalled, res.RequeueAfter)
	}
	if stalled, _ := stalledAfter(deleted.Add(time.Hour + time.Second)); !stalled {
		t.Error("past the deadline on the finalizer's clock: not Stalled")
	}

	ext.SetFailing(false)
	got, err := getWidget(t.Context(), c, w)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.Finalize(t.Context(), got); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("finalize after a successful cleanup: %+v %v", res, err)
	}
	testenv.WaitGone(t, c, w)
}
