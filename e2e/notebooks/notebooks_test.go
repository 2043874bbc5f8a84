package notebooks

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// Bounds, not expectations (two shared cores). idleTimeout is the least the
// API accepts and checkPeriod the least the chart's default bound
// (notebooks.culling.minCheckPeriod) allows: the cull comes as soon as the
// platform lets it.
const (
	readyTimeout = 10 * time.Minute
	idleTimeout  = 5 * time.Minute
	checkPeriod  = 30 * time.Second
	cullTimeout  = idleTimeout + 10*time.Minute
)

// clientLabel marks the suite's client pods; every Notebook of the suite
// admits them (spec.access.allowFrom), so the suite also passes where
// NetworkPolicy is enforced.
const clientLabel = "e2e-client"

func newNotebook(t *testing.T, ns, name string, culling bool) *notebooksv1alpha1.Notebook {
	nb := &notebooksv1alpha1.Notebook{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: notebooksv1alpha1.NotebookSpec{
			Image: steps.Image(t, "jupyter"),
			Resources: commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}},
			Workspace: notebooksv1alpha1.Workspace{Size: ptr.To(resource.MustParse("64Mi")), DeletionPolicy: commonv1alpha1.DeletionPolicyDelete},
			Culling:   notebooksv1alpha1.Culling{Enabled: ptr.To(culling)},
			Access: &notebooksv1alpha1.Access{AllowFrom: []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": clientLabel}},
			}}},
		},
	}
	if culling {
		nb.Spec.Culling.IdleTimeout = &metav1.Duration{Duration: idleTimeout}
		nb.Spec.Culling.CheckPeriod = &metav1.Duration{Duration: checkPeriod}
	}
	return nb
}

// createReady creates the Notebook and waits until it is Ready.
func createReady(t *testing.T, e *steps.Env, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	if err := e.C.Create(t.Context(), nb); err != nil {
		t.Fatalf("create Notebook %s: %v", nb.Name, err)
	}
	e.WaitCondition(t, nb, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	if nb.Status.URL == "" || nb.Status.TokenSecretName == "" {
		t.Fatalf("Ready Notebook %s without status.url or status.tokenSecretName: %+v", nb.Name, nb.Status)
	}
}

// kernelPod runs code in a new kernel of nb through its Service (status.url)
// with its token (from the Secret status.tokenSecretName names).
func kernelPod(t *testing.T, nb *notebooksv1alpha1.Notebook, pod, code string) *corev1.Pod {
	p := steps.ClientPod(pod, steps.Image(t, "jupyter"), `exec python3 -c "$CLIENT"`)
	steps.SetEnv(p, "CLIENT", kernelClient)
	steps.SetEnv(p, "NB_URL", nb.Status.URL)
	steps.SetEnv(p, "CODE", code)
	steps.SecretEnv(p, "JUPYTER_TOKEN", nb.Status.TokenSecretName, "token")
	return p
}

// TestNotebookRunsCodeWithToken: a Ready Notebook runs code in a real
// kernel through its Service with its token, and refuses a wrong token.
func TestNotebookRunsCodeWithToken(t *testing.T) {
	t.Parallel()
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-notebook")
	nb := newNotebook(t, ns, "code", false)
	createReady(t, e, nb)

	out := e.MustRun(t, ns, kernelPod(t, nb, "compute", "import sys; print('answer', 6 * 7, sys.version_info[0])"))
	if !strings.Contains(out, "answer 42 3") {
		t.Fatalf("kernel output %q, want 'answer 42 3'", out)
	}

	wrong := kernelPod(t, nb, "wrong-token", "print('ran')")
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
	busy, idle := newNotebook(t, ns, "busy", true), newNotebook(t, ns, "idle", true)
	createReady(t, e, busy)
	createReady(t, e, idle)

	hold := kernelPod(t, busy, "busy-kernel", "import time\ntime.sleep(6 * 3600)")
	steps.SetEnv(hold, "HOLD", "1")
	e.Started(t, ns, hold)
	steps.Until(t, "the busy kernel's cell to run", steps.PodTimeout, func(ctx context.Context) (bool, error) {
		return strings.Contains(podLogs(ctx, e, ns, hold.Name), "BUSY"), nil
	})
	write := "import os\nopen(os.path.join(os.environ['HOME'], 'kept.txt'), 'w').write('written before the cull')\nprint('written')"
	if out := e.MustRun(t, ns, kernelPod(t, idle, "write", write)); !strings.Contains(out, "written") {
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
	if out := e.MustRun(t, ns, kernelPod(t, idle, "read", read)); !strings.Contains(out, "content: written before the cull") {
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
