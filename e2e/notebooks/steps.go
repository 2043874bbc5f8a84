package notebooks

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

// NewNotebook is a Notebook of the platform's Jupyter image with a small
// workspace, reachable by the suites' client pods; culling with the shortest
// timeouts when culling is true.
func NewNotebook(t *testing.T, ns, name string, culling bool) *notebooksv1alpha1.Notebook {
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

// CreateReady creates the Notebook and waits until it is Ready.
func CreateReady(t *testing.T, e *steps.Env, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	if err := e.C.Create(t.Context(), nb); err != nil {
		t.Fatalf("create Notebook %s: %v", nb.Name, err)
	}
	e.WaitCondition(t, nb, "Ready", metav1.ConditionTrue, "Stalled", readyTimeout)
	if nb.Status.URL == "" || nb.Status.TokenSecretName == "" {
		t.Fatalf("Ready Notebook %s without status.url or status.tokenSecretName: %+v", nb.Name, nb.Status)
	}
}

// KernelPod runs code in a new kernel of nb through its Service (status.url)
// with its token (from the Secret status.tokenSecretName names).
func KernelPod(t *testing.T, nb *notebooksv1alpha1.Notebook, pod, code string) *corev1.Pod {
	p := steps.ClientPod(pod, steps.Image(t, "jupyter"), `exec python3 -c "$CLIENT"`)
	steps.SetEnv(p, "CLIENT", kernelClient)
	steps.SetEnv(p, "NB_URL", nb.Status.URL)
	steps.SetEnv(p, "CODE", code)
	steps.SecretEnv(p, "JUPYTER_TOKEN", nb.Status.TokenSecretName, "token")
	return p
}
