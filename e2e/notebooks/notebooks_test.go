package notebooks

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// TestNotebookRunsCodeWithToken: a Ready Notebook runs code in a real
// kernel through its Service with its token, and refuses a wrong token.
func TestNotebookRunsCodeWithToken(t *testing.T) {
	t.Parallel()
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-notebook")
	nb := NewNotebook(t, ns, "code", false)
	CreateReady(t, e, nb)

	out := e.MustRun(t, ns, KernelPod(t, nb, "compute", "import sys; print('answer', 6 * 7, sys.version_info[0])"))
	if !strings.Contains(out, "answer 42 3") {
		t.Fatalf("kernel output %q, want 'answer 42 3'", out)
	}

	wrong := KernelPod(t, nb, "wrong-token", "print('ran')")
	wrong.Spec.Containers[0].Env = append(wrong.Spec.Containers[0].Env[:len(wrong.Spec.Containers[0].Env)-1],
		corev1.EnvVar{Name: "JUPYTER_TOKEN", Value: "not-the-token"})
	if ok, out := e.Run(t, ns, wrong); ok || strings.Contains(out, "ran") || !strings.Contains(out, "403") {
		t.Fatalf("a wrong token: succeeded=%v, output %q; want HTTP 403 and nothing run", ok, out)
	}
}

// TestNotebookCullKeepsWorkspaceBusyKernelStays runs two Notebooks with the
// shortest timeouts: "busy" runs a long cell from before "idle" last ran
// one. The idle one must be warned, then culled, keep its workspace and
// start again with the restart annotation; the busy one, idle for longer by
// the clock but busy, must still run when the idle one has been culled.
func TestNotebookCullKeepsWorkspaceBusyKernelStays(t *testing.T) {
	t.Parallel()
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-cull")
	busy, idle := NewNotebook(t, ns, "busy", true), NewNotebook(t, ns, "idle", true)
	CreateReady(t, e, busy)
	CreateReady(t, e, idle)

	hold := KernelPod(t, busy, "busy-kernel", "import time\ntime.sleep(6 * 3600)")
	steps.SetEnv(hold, "HOLD", "1")
	e.Started(t, ns, hold)
	steps.Until(t, "the busy kernel's cell to run", steps.PodTimeout, func(ctx context.Context) (bool, error) {
		return strings.Contains(podLogs(ctx, e, ns, hold.Name), "BUSY"), nil
	})
	write := "import os\nopen(os.path.join(os.environ['HOME'], 'kept.txt'), 'w').write('written before the cull')\nprint('written')"
	if out := e.MustRun(t, ns, KernelPod(t, idle, "write", write)); !strings.Contains(out, "written") {
		t.Fatalf("write to the workspace: %q", out)
	}
	claim := idle.Status.WorkspaceClaimName

	waitWarnedThenCulled(t, e, idle)
	if err := e.C.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: claim}, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Fatalf("workspace claim %q after the cull: %v", claim, err)
	}

	// The idle Notebook's cull proves the timeouts fire; the busy one has
	// been idle longer by the clock, so only its busy kernel keeps it.
	if err := e.C.Get(t.Context(), client.ObjectKeyFromObject(busy), busy); err != nil {
		t.Fatal(err)
	}
	if meta.IsStatusConditionTrue(busy.Status.Conditions, notebooksv1alpha1.ConditionCulled) || !meta.IsStatusConditionTrue(busy.Status.Conditions, "Ready") {
		t.Errorf("the Notebook with a busy kernel was culled or is not Ready: %+v", busy.Status.Conditions)
	}
	if warned, err := e.Events(t.Context(), ns, busy.Name, notebooksv1alpha1.ReasonCullWarning); err != nil || len(warned) > 0 {
		t.Errorf("the Notebook with a busy kernel was warned of a cull: %q (%v)", warned, err)
	}

	restart(t, e, idle)
	read := "import os\nprint('content:', open(os.path.join(os.environ['HOME'], 'kept.txt')).read())"
	if out := e.MustRun(t, ns, KernelPod(t, idle, "read", read)); !strings.Contains(out, "content: written before the cull") {
		t.Fatalf("the workspace file after the cull and restart: %q", out)
	}
}

// waitWarnedThenCulled waits for the cull warning (event and
// status.cullDeadline) and then for the cull (Culled=True, Ready=False,
// phase Culled, no pod).
func waitWarnedThenCulled(t *testing.T, e *steps.Env, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	key := client.ObjectKeyFromObject(nb)
	var sawDeadline bool
	steps.Until(t, "Notebook "+nb.Name+" to be culled", cullTimeout, func(ctx context.Context) (bool, error) {
		if err := e.C.Get(ctx, key, nb); err != nil {
			return false, err
		}
		sawDeadline = sawDeadline || nb.Status.CullDeadline != nil
		return meta.IsStatusConditionTrue(nb.Status.Conditions, notebooksv1alpha1.ConditionCulled), nil
	})
	warned, err := e.Events(t.Context(), nb.Namespace, nb.Name, notebooksv1alpha1.ReasonCullWarning)
	if err != nil {
		t.Fatal(err)
	}
	if len(warned) == 0 {
		t.Errorf("Notebook %s was culled without a %s event (status.cullDeadline seen: %v)", nb.Name, notebooksv1alpha1.ReasonCullWarning, sawDeadline)
	}
	if nb.Status.Phase != notebooksv1alpha1.PhaseCulled || meta.IsStatusConditionTrue(nb.Status.Conditions, "Ready") {
		t.Errorf("culled Notebook %s: phase %q, conditions %+v", nb.Name, nb.Status.Phase, nb.Status.Conditions)
	}
	steps.Until(t, "the culled Notebook's pod to go", readyTimeout, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := e.C.List(ctx, &pods, client.InNamespace(nb.Namespace), client.MatchingLabels{"app.kubernetes.io/name": "notebook", "app.kubernetes.io/instance": nb.Name})
		return err == nil && len(pods.Items) == 0, err
	})
}

// restart is the documented user action: a new value of the restart
// annotation (kubectl annotate ... notebooks.mlplatform.dev/restart=...).
func restart(t *testing.T, e *steps.Env, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	patch := client.MergeFrom(nb.DeepCopy())
	if nb.Annotations == nil {
		nb.Annotations = map[string]string{}
	}
	nb.Annotations[notebooksv1alpha1.AnnotationRestart] = time.Now().UTC().Format(time.RFC3339Nano)
	if err := e.C.Patch(t.Context(), nb, patch); err != nil {
		t.Fatalf("restart Notebook %s: %v", nb.Name, err)
	}
	e.WaitCondition(t, nb, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	if meta.IsStatusConditionTrue(nb.Status.Conditions, notebooksv1alpha1.ConditionCulled) || nb.Status.Phase != notebooksv1alpha1.PhaseRunning {
		t.Fatalf("restarted Notebook %s: phase %q, conditions %+v", nb.Name, nb.Status.Phase, nb.Status.Conditions)
	}
}

func podLogs(ctx context.Context, e *steps.Env, ns, name string) string {
	b, err := e.CS.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		return ""
	}
	return string(b)
}
