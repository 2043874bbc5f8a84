package notebook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func idleAt(at time.Time) jupyter.Observation {
	return jupyter.Observation{LastActivity: at, Kernels: 1, TerminalsAvailable: true}
}

func isReady(nb *notebooksv1alpha1.Notebook) bool {
	return conditions.IsTrue(nb, commonv1alpha1.ConditionReady) && conditions.IsCurrent(nb, commonv1alpha1.ConditionReady)
}

// runningNotebook creates a Notebook, acts out its StatefulSet and waits
// until it is Ready with the prober answering idle since activity.
func runningNotebook(t *testing.T, c client.Client, op *operator, nb *notebooksv1alpha1.Notebook, activity time.Time) *notebooksv1alpha1.Notebook {
	t.Helper()
	op.prober.set(nb, idleAt(activity))
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	actOutStatefulSet(t, c, nb)
	return waitNotebook(t, c, nb, "Notebook Ready", isReady)
}

func TestOwnedObjectsAndReady(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := newNotebook(ns, "owned")
	nb.Spec.QueueName = "gpu-queue"
	got := runningNotebook(t, c, op, nb, t0)

	if got.Status.Phase != notebooksv1alpha1.PhaseRunning || got.Status.URL != "http://owned."+ns+".svc.cluster.local/notebook/"+ns+"/owned/" ||
		got.Status.TokenSecretName != "owned-token" || got.Status.WorkspaceClaimName != "owned-workspace" || got.Status.Image == "" {
		t.Errorf("status = %+v", got.Status)
	}
	if got.Status.LastActivity == nil || !got.Status.LastActivity.Time.Equal(t0) {
		t.Errorf("lastActivity = %v, want %v", got.Status.LastActivity, t0)
	}

	secret := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "owned-token"}, secret); err != nil {
		t.Fatal(err)
	}
	token := string(secret.Data[render.TokenKey])
	if len(token) < 32 || op.prober.token(nb) != token {
		t.Errorf("token %q: the prober used %q", token, op.prober.token(nb))
	}
	if strings.Contains(mustJSON(t, got.Status), token) {
		t.Error("the token appears in status")
	}

	sts, err := getStatefulSet(t.Context(), c, nb)
	if err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 1 || sts.Labels[render.LabelQueueName] != "gpu-queue" || sts.Spec.Template.Labels[render.LabelQueueName] != "gpu-queue" {
		t.Errorf("statefulset replicas %d labels %v template labels %v", *sts.Spec.Replicas, sts.Labels, sts.Spec.Template.Labels)
	}
	if err := podsecurity.CheckRestricted(&sts.Spec.Template.ObjectMeta, &sts.Spec.Template.Spec); err != nil {
		t.Error(err)
	}
	for _, o := range []client.Object{&corev1.Service{}, &networkingv1.NetworkPolicy{}, secret, sts} {
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: nameFor(o, nb)}, o); err != nil {
			t.Fatalf("%T: %v", o, err)
		}
		if !metav1.IsControlledBy(o, got) || o.GetLabels()["app.kubernetes.io/managed-by"] != render.OperatorName {
			t.Errorf("%T %s is not controlled by the Notebook or lacks the managed-by label", o, o.GetName())
		}
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "owned-workspace"}, pvc); err != nil {
		t.Fatal(err)
	}
	if len(pvc.OwnerReferences) != 0 {
		t.Errorf("a retained workspace has owners %v", pvc.OwnerReferences)
	}

	// Another actor's change to a field the operator does not set
	// survives, and a settled Notebook is not rewritten.
	sts.Spec.Template.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/admission"}}
	if err := c.Update(t.Context(), sts); err != nil {
		t.Fatal(err)
	}
	op.reconcile(t, got)
	sts, _ = getStatefulSet(t.Context(), c, nb)
	if len(sts.Spec.Template.Spec.SchedulingGates) != 1 {
		t.Error("the operator removed a field another actor set on its StatefulSet")
	}
}

func nameFor(o client.Object, nb *notebooksv1alpha1.Notebook) string {
	if _, ok := o.(*corev1.Secret); ok {
		return nb.Name + "-token"
	}
	return nb.Name
}

func TestSettledAndIdleChecksCostNoWrites(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := newNotebook(ns, "settled")
	nb = runningNotebook(t, c, op, nb, t0)
	waitCacheCurrent(t, c, op, nb)

	// Forty minutes of idle culling checks within the idle timeout, minute
	// by minute: the prober runs every time, nothing is written.
	op.Writes.Reset()
	before := op.prober.count(nb)
	for range 40 {
		op.clock.Step(time.Minute)
		op.reconcile(t, nb)
	}
	if n := op.writesIn(nb.Namespace).Total(); n != 0 {
		t.Fatalf("40 idle checks wrote %d times: %s", n, op.writesIn(nb.Namespace))
	}
	if op.prober.count(nb)-before < 40 {
		t.Fatalf("the prober ran %d times in 40 checks", op.prober.count(nb)-before)
	}

	// Activity within the report interval costs nothing either; a new
	// report costs one status write. The check asks for a probe and
	// decides nothing on the old answer; the new answer brings the
	// Notebook back, and that reconcile reports it.
	activity := op.clock.Now().Add(-30 * time.Second)
	op.answer(nb, idleAt(activity))
	op.reconcileOnce(t, client.ObjectKeyFromObject(nb))
	// The next check reads the operator's cache, as timed checks do a
	// minute apart; let it see the write first.
	reported := activity.Truncate(time.Second)
	testenv.Eventually(t, "the operator's cache sees the report", func(ctx context.Context) (bool, error) {
		got, err := getNotebook(ctx, op.reconciler.Client, nb)
		return err == nil && got.Status.LastActivity != nil && got.Status.LastActivity.Time.Equal(reported), err
	})
	if n := op.writesIn(nb.Namespace).Count("patch", "notebooks/status"); n != 1 {
		t.Fatalf("new activity: %s, want one status patch", op.writesIn(nb.Namespace))
	}
	op.Writes.Reset()
	op.answer(nb, idleAt(op.clock.Now()))
	op.reconcile(t, nb)
	if n := op.writesIn(nb.Namespace).Total(); n != 0 {
		t.Fatalf("activity within the report interval wrote: %s", op.writesIn(nb.Namespace))
	}
}

func TestSuspendAndResume(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := runningNotebook(t, c, op, newNotebook(ns, "suspend"), t0)

	updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = true })
	got := waitNotebook(t, c, nb, "Suspended", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.IsTrue(nb, commonv1alpha1.ConditionSuspended) && nb.Status.Phase == notebooksv1alpha1.PhaseSuspended
	})
	if conditions.IsTrue(got, commonv1alpha1.ConditionReady) || conditions.Get(got, commonv1alpha1.ConditionReconciling) != nil {
		t.Errorf("a suspended Notebook must be not Ready and not Reconciling: %+v", got.Status.Conditions)
	}
	sts := actOutStatefulSet(t, c, nb)
	if *sts.Spec.Replicas != 0 {
		t.Fatalf("suspended: replicas %d", *sts.Spec.Replicas)
	}
	if _, err := getOwnedPVC(t, c, nb); err != nil {
		t.Fatalf("workspace gone while suspended: %v", err)
	}

	op.clock.Step(time.Hour)
	updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = false })
	testenv.Eventually(t, "resumed with one replica", func(ctx context.Context) (bool, error) {
		sts, err := getStatefulSet(ctx, c, nb)
		return err == nil && *sts.Spec.Replicas == 1, err
	})
	sts = actOutStatefulSet(t, c, nb)
	if sts.Annotations[render.AnnotationStartedAt] != t0.Add(time.Hour).Format(time.RFC3339) {
		t.Errorf("started-at %q after resuming, want the resume time", sts.Annotations[render.AnnotationStartedAt])
	}
	waitNotebook(t, c, nb, "Ready after resuming", isReady)
}

func getOwnedPVC(t *testing.T, c client.Client, nb *notebooksv1alpha1.Notebook) (*corev1.PersistentVolumeClaim, error) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	err := c.Get(t.Context(), client.ObjectKey{Namespace: nb.Namespace, Name: nb.Name + "-workspace"}, pvc)
	return pvc, err
}

func TestCullingWarnsCullsAndRestarts(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := runningNotebook(t, c, op, newNotebook(ns, "cull"), t0.Add(5*time.Minute))

	// Idle timeout 1h, warning 10m: the warning comes at 55m.
	op.clock.SetTime(t0.Add(55 * time.Minute))
	op.reconcile(t, nb)
	got, _ := getNotebook(t.Context(), c, nb)
	deadline := t0.Add(65 * time.Minute)
	if got.Status.CullDeadline == nil || !got.Status.CullDeadline.Time.Equal(deadline) {
		t.Fatalf("cullDeadline = %v, want %v", got.Status.CullDeadline, deadline)
	}
	testenv.WaitForEvent(t, c, got, notebooksv1alpha1.ReasonCullWarning)
	waitCached(t, op, nb, func(nb *notebooksv1alpha1.Notebook) bool { return nb.Status.CullDeadline != nil })

	// A probe failure at the deadline never culls.
	op.prober.set(nb, jupyter.Observation{Err: &jupyter.HTTPError{Path: "api/status", Code: 403}})
	op.clock.SetTime(t0.Add(70 * time.Minute))
	op.reconcile(t, nb)
	if sts, _ := getStatefulSet(t.Context(), c, nb); *sts.Spec.Replicas != 1 || sts.Annotations[render.AnnotationCulled] != "" {
		t.Fatal("a failed probe culled the notebook")
	}
	if got, _ := getNotebook(t.Context(), c, nb); !reconcilingWith(notebooksv1alpha1.ReasonJupyterNotReady)(got) || isReady(got) {
		t.Errorf("a failed probe shows %+v, want Reconciling %s and not Ready", got.Status.Conditions, notebooksv1alpha1.ReasonJupyterNotReady)
	}

	// Answering again and still idle: culled.
	op.prober.set(nb, idleAt(t0.Add(5*time.Minute)))
	op.clock.SetTime(t0.Add(71 * time.Minute))
	op.reconcile(t, nb)
	sts, err := getStatefulSet(t.Context(), c, nb)
	if err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 0 || sts.Annotations[render.AnnotationCulled] != "Idle" {
		t.Fatalf("after the deadline: replicas %d annotations %v", *sts.Spec.Replicas, sts.Annotations)
	}
	got = waitNotebook(t, c, nb, "Culled", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.IsTrue(nb, notebooksv1alpha1.ConditionCulled) && nb.Status.Phase == notebooksv1alpha1.PhaseCulled
	})
	if got.Status.CullDeadline != nil {
		t.Errorf("cullDeadline %v stays after the cull", got.Status.CullDeadline)
	}
	testenv.WaitForEvent(t, c, got, notebooksv1alpha1.ConditionCulled)
	actOutStatefulSet(t, c, nb)
	if _, err := getOwnedPVC(t, c, nb); err != nil {
		t.Fatalf("workspace gone after the cull: %v", err)
	}

	// A culled notebook costs no probes and no writes; the decision lives
	// on the StatefulSet, so a restarted operator does not re-infer it.
	waitCacheCurrent(t, c, op, nb)
	op.Writes.Reset()
	probes := op.prober.count(nb)
	for range 10 {
		op.clock.Step(time.Hour)
		op.reconcile(t, nb)
	}
	if op.writesIn(nb.Namespace).Total() != 0 || op.prober.count(nb) != probes {
		t.Fatalf("culled checks: writes %s, probes %d", op.writesIn(nb.Namespace), op.prober.count(nb)-probes)
	}

	// The documented user action starts it again.
	got = updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) {
		metav1.SetMetaDataAnnotation(&nb.ObjectMeta, notebooksv1alpha1.AnnotationRestart, "2026-03-03")
	})
	testenv.Eventually(t, "restarted", func(ctx context.Context) (bool, error) {
		sts, err := getStatefulSet(ctx, c, nb)
		return err == nil && *sts.Spec.Replicas == 1 && sts.Annotations[render.AnnotationCulled] == "" &&
			sts.Annotations[render.AnnotationRestartHandled] == "2026-03-03", err
	})
	testenv.WaitForEvent(t, c, got, notebooksv1alpha1.ReasonRestarted)
	actOutStatefulSet(t, c, nb)
	waitNotebook(t, c, nb, "Ready after the restart", func(nb *notebooksv1alpha1.Notebook) bool {
		return isReady(nb) && !conditions.IsTrue(nb, notebooksv1alpha1.ConditionCulled)
	})
}

func TestMaxLifetimeCullsABusyNotebook(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := newNotebook(ns, "lifetime")
	nb.Spec.Culling.MaxLifetime = &metav1.Duration{Duration: 8 * time.Hour}
	nb = runningNotebook(t, c, op, nb, t0)
	op.prober.set(nb, jupyter.Observation{LastActivity: t0, Busy: true, Kernels: 1})

	op.clock.SetTime(t0.Add(7*time.Hour + 55*time.Minute))
	op.reconcile(t, nb)
	got, _ := getNotebook(t.Context(), c, nb)
	if got.Status.CullDeadline == nil {
		t.Fatal("no warning before the end of the lifetime")
	}
	waitCached(t, op, nb, func(nb *notebooksv1alpha1.Notebook) bool { return nb.Status.CullDeadline != nil })
	op.clock.SetTime(got.Status.CullDeadline.Time)
	op.reconcile(t, nb)
	sts, _ := getStatefulSet(t.Context(), c, nb)
	if *sts.Spec.Replicas != 0 || sts.Annotations[render.AnnotationCulled] != "MaxLifetime" {
		t.Fatalf("at the end of the lifetime: replicas %d annotations %v", *sts.Spec.Replicas, sts.Annotations)
	}
}

// TestBusyNotebookWithoutCullingReportsActivity: with culling off, a kernel
// that stays busy for hours is activity now, so status.lastActivity must
// follow it, lagging by at most the report interval as the API documents.
// Jupyter sends the operator no event when a kernel runs, so the operator
// has to look again by itself: without that the recorded activity stays at
// the last event (here, the notebook's start) however long the kernel runs.
func TestBusyNotebookWithoutCullingReportsActivity(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := newNotebook(ns, "busy-no-cull")
	nb.Spec.Culling.Enabled = ptr.To(false)
	nb = runningNotebook(t, c, op, nb, t0)
	interval := op.reconciler.Config.ReportInterval.Duration
	// The kernel has been busy since t0; Jupyter's last_activity stays at
	// the start of the execution.
	op.prober.set(nb, jupyter.Observation{LastActivity: t0, Busy: true, Kernels: 1})

	for i := range 3 {
		op.clock.SetTime(t0.Add(time.Hour + time.Duration(i)*interval))
		waitCacheCurrent(t, c, op, nb)
		op.reconcile(t, nb)
		// Once more, with the answer in, for the requeue it asks for.
		res := op.reconcileOnce(t, client.ObjectKeyFromObject(nb))
		if res.RequeueAfter <= 0 || res.RequeueAfter > interval {
			t.Fatalf("a running notebook without culling is looked at again after %v, want within the report interval %v", res.RequeueAfter, interval)
		}
		got, err := getNotebook(t.Context(), c, nb)
		if err != nil {
			t.Fatal(err)
		}
		want := op.clock.Now().Truncate(time.Second)
		if got.Status.LastActivity == nil || !got.Status.LastActivity.Time.Equal(want) {
			t.Fatalf("check %d: status.lastActivity = %v while the kernel is busy, want now (%v), not the kernel's last_activity %v",
				i, got.Status.LastActivity, want, t0)
		}
		if got.Status.CullDeadline != nil || conditions.IsTrue(got, notebooksv1alpha1.ConditionCulled) {
			t.Fatalf("culling is off, but the status shows deadline %v culled %v", got.Status.CullDeadline, conditions.IsTrue(got, notebooksv1alpha1.ConditionCulled))
		}
	}
}

func TestRestartWhileKernelBusyIsDeferred(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := runningNotebook(t, c, op, newNotebook(ns, "deferred"), t0)
	sts, _ := getStatefulSet(t.Context(), c, nb)
	oldHash := sts.Annotations[render.AnnotationTemplateHash]

	op.answer(nb, jupyter.Observation{LastActivity: t0, Busy: true, Kernels: 1})
	updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Image = "registry.example.com/jupyter:2" })
	got := waitNotebook(t, c, nb, "UpdatePending", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.IsTrue(nb, notebooksv1alpha1.ConditionUpdatePending)
	})
	testenv.WaitForEvent(t, c, got, "UpdateDeferred")
	for range 3 {
		op.clock.Step(time.Minute)
		op.reconcile(t, nb)
	}
	sts, _ = getStatefulSet(t.Context(), c, nb)
	if sts.Annotations[render.AnnotationTemplateHash] != oldHash || sts.Spec.Template.Spec.Containers[0].Image == "registry.example.com/jupyter:2" {
		t.Fatal("the pod template changed while a kernel was busy")
	}

	// The user forces it.
	updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) {
		metav1.SetMetaDataAnnotation(&nb.ObjectMeta, notebooksv1alpha1.AnnotationForceUpdate, "1")
	})
	testenv.Eventually(t, "forced update applied", func(ctx context.Context) (bool, error) {
		sts, err := getStatefulSet(ctx, c, nb)
		return err == nil && sts.Spec.Template.Spec.Containers[0].Image == "registry.example.com/jupyter:2", err
	})
	actOutStatefulSet(t, c, nb)
	waitNotebook(t, c, nb, "UpdatePending cleared", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.Get(nb, notebooksv1alpha1.ConditionUpdatePending) == nil
	})

	// The next change waits again (the force request was used up), and
	// goes through once the kernel is idle.
	got = updateNotebook(t, c, nb, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Image = "registry.example.com/jupyter:3" })
	waitNotebook(t, c, nb, "UpdatePending again", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.IsTrue(nb, notebooksv1alpha1.ConditionUpdatePending)
	})
	op.answer(nb, idleAt(t0))
	op.reconcile(t, nb)
	sts, _ = getStatefulSet(t.Context(), c, nb)
	if img := sts.Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/jupyter:3" {
		t.Fatalf("image %s once idle, want the deferred change applied", img)
	}
	testenv.WaitForEvent(t, c, got, notebooksv1alpha1.ReasonUpdateApplied)
}

func TestWorkspaceRetainAndDelete(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	retain := runningNotebook(t, c, op, newNotebook(ns, "keep"), t0)
	del := newNotebook(ns, "drop")
	del.Spec.Workspace.DeletionPolicy = commonv1alpha1.DeletionPolicyDelete
	del = runningNotebook(t, c, op, del, t0)
	keptPVC, err := getOwnedPVC(t, c, retain)
	if err != nil {
		t.Fatal(err)
	}
	if pvc, err := getOwnedPVC(t, c, del); err != nil || !metav1.IsControlledBy(pvc, del) {
		t.Fatalf("a Delete workspace must be owned by its Notebook: %v", err)
	}
	// A pod of the StatefulSet uses each workspace, so PVC protection holds
	// the claims while it exists.
	for _, nb := range []*notebooksv1alpha1.Notebook{retain, del} {
		createWorkspacePod(t, c, nb)
	}

	for _, nb := range []*notebooksv1alpha1.Notebook{retain, del} {
		if err := c.Delete(t.Context(), nb); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the Delete workspace is collected, pod and all", func(ctx context.Context) (bool, error) {
		_, err := getOwnedPVC(t, c, del)
		return apierrors.IsNotFound(err), nil
	})
	testenv.Eventually(t, "both Notebooks and StatefulSets are gone", func(ctx context.Context) (bool, error) {
		for _, nb := range []*notebooksv1alpha1.Notebook{retain, del} {
			if _, err := getNotebook(ctx, c, nb); !apierrors.IsNotFound(err) {
				return false, nil
			}
			if _, err := getStatefulSet(ctx, c, nb); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	pvc, err := getOwnedPVC(t, c, retain)
	if err != nil || pvc.UID != keptPVC.UID || !pvc.DeletionTimestamp.IsZero() {
		t.Fatalf("the retained workspace: %v (deleting: %v)", err, pvc.DeletionTimestamp)
	}

	// A Notebook of the same name mounts the retained workspace again.
	again := runningNotebook(t, c, op, newNotebook(ns, "keep"), t0)
	if pvc, err := getOwnedPVC(t, c, again); err != nil || pvc.UID != keptPVC.UID {
		t.Fatalf("the new Notebook did not reuse the retained workspace: %v", err)
	}
}

// createWorkspacePod acts out the StatefulSet controller creating the
// pod, which mounts the workspace.
func createWorkspacePod(t *testing.T, c client.Client, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	sts, err := getStatefulSet(t.Context(), c, nb)
	if err != nil {
		t.Fatal(err)
	}
	// The API server's quota admission reads quotas through its own
	// informer: right after a test deleted a full quota it may still
	// refuse the pod, for as long as that informer lags (a loaded machine).
	testenv.Eventually(t, "the workspace pod created", func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, podOf(sts))
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota") {
			return false, nil
		}
		return err == nil, err
	})
	testenv.Eventually(t, "PVC protection holds the workspace", func(ctx context.Context) (bool, error) {
		pvc, err := getOwnedPVC(t, c, nb)
		return err == nil && len(pvc.Finalizers) > 0, nil
	})
}

func TestNamespaceDeletionCompletes(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	keep := runningNotebook(t, c, op, newNotebook(ns, "keep"), t0)
	drop := newNotebook(ns, "drop")
	drop.Spec.Workspace.DeletionPolicy = commonv1alpha1.DeletionPolicyDelete
	drop = runningNotebook(t, c, op, drop, t0)
	createWorkspacePod(t, c, keep)
	createWorkspacePod(t, c, drop)

	if err := c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "namespace deletion completes", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestMissingFeatureStoreDoesNotBlock(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := newNotebook(ns, "features")
	nb.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "missing"}}}
	got := runningNotebook(t, c, op, nb, t0)
	cond := conditions.Get(got, notebooksv1alpha1.ConditionFeatureStoresReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != commonv1alpha1.ReasonDependencyNotFound || !strings.Contains(cond.Message, "missing") {
		t.Fatalf("FeatureStoresReady = %+v", cond)
	}
}

func TestInvalidMountStalls(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	startOperator(t, operatorOptions{})
	nb := newNotebook(ns, "badmount")
	nb.Spec.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	waitNotebook(t, c, nb, "Stalled", func(nb *notebooksv1alpha1.Notebook) bool {
		s := conditions.Get(nb, commonv1alpha1.ConditionStalled)
		return s != nil && s.Status == metav1.ConditionTrue && strings.Contains(s.Message, "data")
	})
	if _, err := getStatefulSet(t.Context(), c, nb); !apierrors.IsNotFound(err) {
		t.Fatalf("a StatefulSet was created for an invalid spec: %v", err)
	}
}

func TestPodStartFailureIsReported(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	startOperator(t, operatorOptions{})
	for name, tc := range map[string]struct {
		// status is what the kubelet or the scheduler reports on the pod.
		status     corev1.PodStatus
		wantReason string
		// wantStalled: only the user can end it (kstatus Failed), unlike a
		// pod waiting for room, which is still in progress.
		wantStalled bool
	}{
		"pull": {
			status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name: render.ContainerName, Image: "x",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"x\""}},
			}}},
			wantReason:  "ImagePullBackOff",
			wantStalled: true,
		},
		"unschedulable": {
			status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
			}}},
			wantReason: corev1.PodReasonUnschedulable,
		},
		"crashloop": {
			status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name: render.ContainerName, Image: "x", RestartCount: 5,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 2m40s restarting failed container=notebook pod=crashloop-0"}},
			}}},
			wantReason:  "CrashLoopBackOff",
			wantStalled: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			nb := newNotebook(ns, name)
			if err := c.Create(t.Context(), nb); err != nil {
				t.Fatal(err)
			}
			actOutStatefulSet(t, c, nb)
			createWorkspacePod(t, c, nb)
			pod := &corev1.Pod{}
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name + "-0"}, pod); err != nil {
				t.Fatal(err)
			}
			pod.Status = tc.status
			if err := c.Status().Update(t.Context(), pod); err != nil {
				t.Fatal(err)
			}
			got := waitNotebook(t, c, nb, "PodStartFailed", func(nb *notebooksv1alpha1.Notebook) bool {
				r := conditions.Get(nb, commonv1alpha1.ConditionReady)
				return r != nil && r.Reason == notebooksv1alpha1.ReasonPodStartFailed && strings.HasPrefix(r.Message, tc.wantReason+": ")
			})
			if conditions.IsTrue(got, commonv1alpha1.ConditionStalled) != tc.wantStalled ||
				conditions.IsTrue(got, commonv1alpha1.ConditionReconciling) == tc.wantStalled || got.Status.Phase != notebooksv1alpha1.PhaseFailed {
				t.Errorf("conditions %+v phase %s", got.Status.Conditions, got.Status.Phase)
			}
			e := testenv.WaitForEvent(t, c, got, notebooksv1alpha1.ReasonPodStartFailed)
			if e.Type != corev1.EventTypeWarning || !strings.HasPrefix(e.Message, tc.wantReason+": ") {
				t.Errorf("event %s %q", e.Type, e.Message)
			}
		})
	}
}

// TestQuotaRejectionIsReported acts out the StatefulSet controller meeting
// a full ResourceQuota: the API server refuses the pod, and the controller
// reports that only as a FailedCreate event on the StatefulSet.
func TestQuotaRejectionIsReported(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	fillQuota(t, c, ns)
	nb := newNotebook(ns, "quota")
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	var sts *appsv1.StatefulSet
	testenv.Eventually(t, "StatefulSet", func(ctx context.Context) (bool, error) {
		var err error
		sts, err = getStatefulSet(ctx, c, nb)
		return err == nil, client.IgnoreNotFound(err)
	})
	createErr := c.Create(t.Context(), podOf(sts))
	if !apierrors.IsForbidden(createErr) || !strings.Contains(createErr.Error(), "exceeded quota") {
		t.Fatalf("creating the pod against a full quota: %v", createErr)
	}

	// A FailedCreate left over from before the operator started this
	// server says nothing about it.
	recordFailedCreate(t, c, sts, "create Pod quota-0 in StatefulSet quota failed error: an old failure", op.clock.Now().Add(-2*time.Hour))
	waitCachedEvents(t, op, sts, 1)
	op.reconcile(t, nb)
	if got, _ := getNotebook(t.Context(), c, nb); conditions.Get(got, commonv1alpha1.ConditionReady).Reason != notebooksv1alpha1.ReasonStarting {
		t.Fatalf("an event from an earlier start was reported: %+v", got.Status.Conditions)
	}

	// The StatefulSet controller's event, as it formats it: the watch on
	// FailedCreate events reconciles the Notebook.
	recordFailedCreate(t, c, sts, fmt.Sprintf("create Pod quota-0 in StatefulSet quota failed error: %v", createErr), op.clock.Now())
	got := waitNotebook(t, c, nb, "QuotaExceeded reported", func(nb *notebooksv1alpha1.Notebook) bool {
		r := conditions.Get(nb, commonv1alpha1.ConditionReady)
		return r != nil && r.Reason == commonv1alpha1.ReasonPodsRefused && strings.HasPrefix(r.Message, "QuotaExceeded: ") && strings.Contains(r.Message, "exceeded quota: compute")
	})
	if got.Status.Phase != notebooksv1alpha1.PhaseFailed || !conditions.IsTrue(got, commonv1alpha1.ConditionReconciling) {
		t.Errorf("phase %s conditions %+v", got.Status.Phase, got.Status.Conditions)
	}
	if e := testenv.WaitForEvent(t, c, got, commonv1alpha1.ReasonPodsRefused); !strings.Contains(e.Message, "exceeded quota") {
		t.Errorf("event %q", e.Message)
	}

	// The controller retrying into the same full quota changes nothing.
	waitCachedEvents(t, op, sts, 2)
	waitCached(t, op, nb, func(nb *notebooksv1alpha1.Notebook) bool { return nb.Status.Phase == notebooksv1alpha1.PhaseFailed })
	op.Writes.Reset()
	op.reconcile(t, nb)
	if n := op.writesIn(nb.Namespace).Total(); n != 0 {
		t.Fatalf("an unchanged quota rejection wrote: %s", op.writesIn(nb.Namespace))
	}

	// Quota raised: the pod is created, and the report goes away.
	if err := c.Delete(t.Context(), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "compute"}}); err != nil {
		t.Fatal(err)
	}
	createWorkspacePod(t, c, nb)
	waitNotebook(t, c, nb, "starting once the pod exists", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.Get(nb, commonv1alpha1.ConditionReady).Reason == notebooksv1alpha1.ReasonStarting
	})
}

// fillQuota acts out the resource quota controller: a ResourceQuota that
// admits no pod, with its status computed, so admission enforces it.
func fillQuota(t *testing.T, c client.Client, ns string) {
	t.Helper()
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "compute"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if err := c.Create(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := c.Status().Update(t.Context(), q); err != nil {
		t.Fatal(err)
	}
}

// podOf is the pod the StatefulSet controller creates for ordinal 0.
func podOf(sts *appsv1.StatefulSet) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sts.Namespace, Name: sts.Name + "-0", Labels: sts.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: sts.Spec.Template.Spec,
	}
}

// recordFailedCreate records the event the StatefulSet controller records
// when it cannot create a pod. Its timestamps come from the operator's
// injected clock, which stands for the cluster's time in these tests.
func recordFailedCreate(t *testing.T, c client.Client, sts *appsv1.StatefulSet, message string, at time.Time) {
	t.Helper()
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, GenerateName: sts.Name + "."},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: sts.Namespace, Name: sts.Name, UID: sts.UID, ResourceVersion: sts.ResourceVersion,
		},
		Reason: "FailedCreate", Message: message, Type: corev1.EventTypeWarning, Count: 1,
		Source:         corev1.EventSource{Component: "statefulset-controller"},
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
	}
	if err := c.Create(t.Context(), e); err != nil {
		t.Fatal(err)
	}
}

// waitCachedEvents waits until the operator's event cache holds n
// FailedCreate events of the StatefulSet.
func waitCachedEvents(t *testing.T, op *operator, sts *appsv1.StatefulSet, n int) {
	t.Helper()
	testenv.Eventually(t, "the operator's event cache", func(ctx context.Context) (bool, error) {
		events, err := op.reconciler.Events.List(ctx, sts.Namespace, sts.UID)
		return err == nil && len(events) == n, err
	})
}

// waitCached waits until the operator's cache shows the Notebook in the
// given state, before a direct reconcile that depends on it.
func waitCached(t *testing.T, op *operator, nb *notebooksv1alpha1.Notebook, cond func(*notebooksv1alpha1.Notebook) bool) {
	t.Helper()
	testenv.Eventually(t, "the operator's cache catches up", func(ctx context.Context) (bool, error) {
		got, err := getNotebook(ctx, op.reconciler.Client, nb)
		return err == nil && cond(got), err
	})
}

func TestDriftOfOwnedFieldsIsRevertedOthersAreKept(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	nb := runningNotebook(t, c, op, newNotebook(ns, "drift"), t0)
	sts, err := getStatefulSet(t.Context(), c, nb)
	if err != nil {
		t.Fatal(err)
	}
	image := sts.Spec.Template.Spec.Containers[0].Image

	// Kueue admits the workload: a toleration and a nodeSelector the
	// operator never sets. They stay, and cost the operator no write.
	// (The template change rolls the pod: the test acts that out.)
	toleration := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	op.Writes.Reset()
	updateStatefulSet(t, c, nb, func(sts *appsv1.StatefulSet) {
		sts.Spec.Template.Spec.Tolerations = append(sts.Spec.Template.Spec.Tolerations, toleration)
		sts.Spec.Template.Spec.NodeSelector = map[string]string{"cloud.example.com/pool": "gpu"}
	})
	actOutStatefulSet(t, c, nb)
	settle(t, c, op, nb)
	if n := op.writesIn(nb.Namespace).Count("patch", "statefulsets"); n != 0 {
		t.Fatalf("another actor's toleration made the operator write its StatefulSet: %s", op.writesIn(nb.Namespace))
	}
	op.Writes.Reset()
	op.reconcile(t, nb)
	if n := op.writesIn(nb.Namespace).Total(); n != 0 {
		t.Fatalf("a settled Notebook with Kueue's fields wrote: %s", op.writesIn(nb.Namespace))
	}

	// Somebody changes fields the operator owns: the image of its
	// container and the Service's selector. Both are reverted through the
	// watch, and the toleration and nodeSelector survive the revert.
	updateStatefulSet(t, c, nb, func(sts *appsv1.StatefulSet) {
		sts.Spec.Template.Spec.Containers[0].Image = "registry.example.com/not-the-notebook:1"
	})
	svc := &corev1.Service{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(nb), svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector[render.LabelName] = "someone-else"
	if err := c.Update(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the image and the selector are reverted", func(ctx context.Context) (bool, error) {
		sts, err := getStatefulSet(ctx, c, nb)
		if err != nil {
			return false, err
		}
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(nb), svc); err != nil {
			return false, err
		}
		return sts.Spec.Template.Spec.Containers[0].Image == image && svc.Spec.Selector[render.LabelName] == nb.Name, nil
	})
	sts, _ = getStatefulSet(t.Context(), c, nb)
	if tol := sts.Spec.Template.Spec.Tolerations; len(tol) != 1 || tol[0] != toleration || sts.Spec.Template.Spec.NodeSelector["cloud.example.com/pool"] != "gpu" {
		t.Errorf("reverting the image dropped Kueue's fields: tolerations %v nodeSelector %v", tol, sts.Spec.Template.Spec.NodeSelector)
	}

	// Reverted and settled: checks cost no writes again.
	actOutStatefulSet(t, c, nb)
	settle(t, c, op, nb)
	op.Writes.Reset()
	op.reconcile(t, nb)
	if n := op.writesIn(nb.Namespace).Total(); n != 0 {
		t.Fatalf("a settled Notebook wrote after the revert: %s", op.writesIn(nb.Namespace))
	}
}

// updateStatefulSet changes the Notebook's StatefulSet as another actor
// would, with its own field manager.
func updateStatefulSet(t *testing.T, c client.Client, nb *notebooksv1alpha1.Notebook, mutate func(*appsv1.StatefulSet)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts, err := getStatefulSet(t.Context(), c, nb)
		if err != nil {
			return err
		}
		mutate(sts)
		return c.Update(t.Context(), sts, client.FieldOwner("someone-else"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// settle waits until the Notebook is Ready again and the operator's cache
// shows both it and its StatefulSet as the API server has them, so that a
// direct reconcile afterwards sees the settled state.
func settle(t *testing.T, c client.Client, op *operator, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	waitNotebook(t, c, nb, "Ready again", isReady)
	testenv.Eventually(t, "the operator's cache catches up", func(ctx context.Context) (bool, error) {
		sts, err := getStatefulSet(ctx, c, nb)
		if err != nil {
			return false, err
		}
		cached, err := getStatefulSet(ctx, op.reconciler.Client, nb)
		if err != nil {
			return false, err
		}
		got, err := getNotebook(ctx, op.reconciler.Client, nb)
		return err == nil && cached.ResourceVersion == sts.ResourceVersion && isReady(got), err
	})
	op.writesIn(nb.Namespace).WaitQuiet(t, time.Second)
}

func TestCullingMetrics(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	m := op.reconciler.metrics
	// The collectors are process-wide: measure what this test adds.
	culls, reclaimed := m.culls.WithLabelValues(notebooksv1alpha1.ReasonIdle), m.accelerator.WithLabelValues("gpu")
	cullsBefore, reclaimedBefore := testutil.ToFloat64(culls), testutil.ToFloat64(reclaimed)
	gpuNotebook := func(name string) *notebooksv1alpha1.Notebook {
		nb := newNotebook(ns, name)
		nb.Spec.Resources.Accelerators = &commonv1alpha1.Accelerators{Count: 2, Type: "gpu"}
		return runningNotebook(t, c, op, nb, op.clock.Now())
	}

	// Culled, then started again by its user half an hour later: two
	// GPUs freed for 30 minutes.
	restarted := gpuNotebook("restarted")
	cullIdle(t, c, op, restarted)
	if got := testutil.ToFloat64(culls) - cullsBefore; got != 1 {
		t.Errorf("culls_total{reason=Idle} grew by %v, want 1", got)
	}
	op.clock.Step(30 * time.Minute)
	updateNotebook(t, c, restarted, func(nb *notebooksv1alpha1.Notebook) {
		metav1.SetMetaDataAnnotation(&nb.ObjectMeta, notebooksv1alpha1.AnnotationRestart, "1")
	})
	testenv.Eventually(t, "2 GPUs x 30 minutes reclaimed", func(context.Context) (bool, error) {
		return testutil.ToFloat64(reclaimed)-reclaimedBefore == 2*1800, nil
	})

	// Culled, then deleted an hour later without ever running again: two
	// GPUs freed for the hour, counted at the deletion.
	deleted := gpuNotebook("deleted")
	cullIdle(t, c, op, deleted)
	if got := testutil.ToFloat64(culls) - cullsBefore; got != 2 {
		t.Errorf("culls_total{reason=Idle} grew by %v, want 2", got)
	}
	op.clock.Step(time.Hour)
	if err := c.Delete(t.Context(), deleted); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "2 GPUs x 30 minutes + 2 GPUs x 1 hour reclaimed", func(context.Context) (bool, error) {
		return testutil.ToFloat64(reclaimed)-reclaimedBefore == 2*1800+2*3600, nil
	})
	// The running gauge counts every Notebook in the test cluster, those
	// of earlier tests too: look at this test's two.
	m.mu.Lock()
	restartedRuns, deletedRuns := m.runners[client.ObjectKeyFromObject(restarted)], m.runners[client.ObjectKeyFromObject(deleted)]
	m.mu.Unlock()
	if !restartedRuns || deletedRuns {
		t.Errorf("counted as running: restarted %v (want true), deleted %v (want false)", restartedRuns, deletedRuns)
	}
}

// cullIdle lets a running notebook go idle from now until the operator
// warns and then culls it, with direct culling checks.
func cullIdle(t *testing.T, c client.Client, op *operator, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	idleSince := op.clock.Now()
	op.prober.set(nb, idleAt(idleSince))
	// Idle timeout 1h, warning 10m.
	op.clock.SetTime(idleSince.Add(55 * time.Minute))
	op.reconcile(t, nb)
	waitCached(t, op, nb, func(nb *notebooksv1alpha1.Notebook) bool { return nb.Status.CullDeadline != nil })
	op.clock.SetTime(idleSince.Add(66 * time.Minute))
	op.reconcile(t, nb)
	waitNotebook(t, c, nb, "Culled", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.IsTrue(nb, notebooksv1alpha1.ConditionCulled)
	})
}

// TestNotebookInTheClustersOwnNamespaceStalls: a Notebook in a kube-*
// namespace, where the chart's owned-objects policy refuses the operator
// every write, stalls at once with NamespaceReserved and gets no children
// (this operator runs as an administrator here, whom the policy would
// not stop). Before, it said it was starting for ever and only
// ReconcileError events told the refusal.
func TestNotebookInTheClustersOwnNamespaceStalls(t *testing.T) {
	c := env.AdminClient(t, scheme)
	startOperator(t, operatorOptions{})
	nb := newNotebook(metav1.NamespacePublic, "")
	nb.Name, nb.GenerateName = "", "reserved-"
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), nb) })
	got := waitNotebook(t, c, nb, "Stalled", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.IsTrue(nb, commonv1alpha1.ConditionStalled)
	})
	stalled := conditions.Get(got, commonv1alpha1.ConditionStalled)
	if stalled.Reason != commonv1alpha1.ReasonNamespaceReserved || !strings.Contains(stalled.Message, "create the Notebook in another namespace") {
		t.Errorf("Stalled %s: %q, want %s naming the remedy", stalled.Reason, stalled.Message, commonv1alpha1.ReasonNamespaceReserved)
	}
	testenv.WaitForEvent(t, c, nb, commonv1alpha1.ReasonNamespaceReserved)
	for _, child := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}, &corev1.Secret{}} {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(nb), child); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s in %s: %v, want none", child, nb.Name, nb.Namespace, err)
		}
	}
}
