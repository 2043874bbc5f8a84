package kueuearrival

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	notebookstesting "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/controller/notebook"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/conditions"
	sharedkueue "github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/kueue"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
)

// TestMain starts a control plane without Kueue, with the real
// StatefulSet controller, which creates the Notebook's pod for Kueue to
// gate.
func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = notebooksv1alpha1.AddToScheme(scheme)
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "charts", "notebook-operator", "files", "crds")},
		ControllerManager: true,
		Controllers:       []string{"statefulset-controller"},
	}, &env)
}

// idle answers every probe: Jupyter runs, idle since the test began.
type idle struct{ since time.Time }

func (p idle) Probe(context.Context, jupyter.Target) jupyter.Observation {
	return jupyter.Observation{LastActivity: p.since, TerminalsAvailable: true}
}

// TestKueueInstalledAfterTheOperatorIsWatched: the operator starts in a
// cluster without Kueue; Kueue is installed and started afterwards, and a
// Notebook beyond its queue's quota is then Queued with Kueue's reason,
// read from the Workload Kueue keeps for its StatefulSet, without an
// operator restart.
func TestKueueInstalledAfterTheOperatorIsWatched(t *testing.T) {
	c := env.AdminClient(t, scheme)
	_, r := operatortest.StartController(t, operatortest.Options{
		RESTConfig: env.Config,
		Manager:    manager.Options{Name: render.OperatorName, Scheme: scheme, OwnedObjects: notebook.OwnedObjects()},
	}, operatortest.Controller[*notebook.Reconciler]{
		Build: func(mgr ctrl.Manager, _ manager.Config) (*notebook.Reconciler, error) {
			cfg := config.Default()
			cfg.NetworkPolicy.OperatorNamespace = "mlp-system"
			r, err := notebook.NewReconciler(mgr, cfg, accelerator.Default())
			if err != nil {
				return nil, err
			}
			r.Prober = idle{since: time.Now()}
			r.Endpoint = func(nb *notebooksv1alpha1.Notebook) string { return "fake://" + nb.Namespace + "/" + nb.Name }
			return r, nil
		},
	})
	if r.WatchesWorkloads {
		t.Fatal("Kueue's Workload CRD is installed already: this test needs the operator to start without it")
	}
	ns := testenv.CreateNamespace(t, c, "nblate")

	kueue.ForTest(t, env, "kueue", kueue.Options{Frameworks: []string{"statefulset", "batch/job"}})
	name := ns + "-team"
	objs := []*unstructured.Unstructured{
		kueue.Object("ResourceFlavor", "", name, map[string]any{"spec": map[string]any{}}),
		kueue.Object("ClusterQueue", "", name, map[string]any{"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: ns}},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "memory"},
				"flavors": []any{map[string]any{"name": name, "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": "1"},
					map[string]any{"name": "memory", "nominalQuota": "64Gi"},
				}}},
			}},
		}}),
		kueue.Object("LocalQueue", ns, "team", map[string]any{"spec": map[string]any{"clusterQueue": name}}),
	}
	kueue.CreateAll(t, c, objs...)
	kueue.WaitActive(t, c, objs[1])

	nb := notebookstesting.MakeNotebook(ns, "big").Queue("team").Obj()
	nb.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if err := c.Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	got := &notebooksv1alpha1.Notebook{}
	testenv.Eventually(t, "the Notebook is Queued with Kueue's reason", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(nb), got); err != nil {
			return false, err
		}
		q := conditions.Get(got, notebooksv1alpha1.ConditionQueued)
		if got.Status.Phase != notebooksv1alpha1.PhaseQueued || q == nil || q.Status != metav1.ConditionTrue {
			return false, nil
		}
		wls := &unstructured.UnstructuredList{}
		wls.SetGroupVersionKind(sharedkueue.WorkloadGVK.GroupVersion().WithKind("WorkloadList"))
		if err := c.List(ctx, wls, client.InNamespace(ns)); err != nil || len(wls.Items) == 0 {
			return false, err
		}
		st := sharedkueue.Observe(&wls.Items[0])
		return st.Message != "" && strings.Contains(q.Message, st.Message), nil
	})
	t.Logf("Queued condition once Kueue appeared: %s", conditions.Get(got, notebooksv1alpha1.ConditionQueued).Message)
}
