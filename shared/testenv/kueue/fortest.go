package kueue

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workload "github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var (
	buildOnce sync.Once
	binary    string
	moduleDir string
	buildErr  error
)

// ForTest runs a fresh Kueue for one test, as user (a cluster
// administrator of env, whose name the audit log shows), with opts'
// frameworks and visibility server; ForTest fills in the binary, the
// module and a work dir. The binary is built once per process; a test is skipped
// when it cannot be built. Kueue's log is printed when the test fails, and
// Kueue is stopped when it ends.
func ForTest(t testing.TB, env *testenv.Env, user string, opts Options) *Kueue {
	t.Helper()
	buildOnce.Do(func() {
		if binary, buildErr = Binary(testenv.RepoRoot()); buildErr == nil {
			moduleDir, buildErr = ModuleDir(testenv.RepoRoot())
		}
	})
	if buildErr != nil {
		t.Skipf("the Kueue controller manager cannot be built (make kueue-bin): %v", buildErr)
	}
	admin, err := env.AddUser(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts.Binary, opts.ModuleDir, opts.WorkDir = binary, moduleDir, dir
	k, err := Start(t.Context(), admin, opts)
	if err != nil {
		if b, rerr := os.ReadFile(filepath.Join(dir, "kueue.log")); rerr == nil {
			t.Logf("Kueue's log:\n%s", b)
		}
		t.Fatalf("starting Kueue: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Kueue's log:\n%s", k.Log())
		}
		if err := k.Stop(); err != nil {
			t.Errorf("stopping Kueue: %v", err)
		}
	})
	return k
}

// Object is a Kueue object of kind (ClusterQueue, LocalQueue ...) in the
// version Kueue v0.17 stores, with fields besides its name.
func Object(kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetGroupVersionKind(workload.WorkloadGVK.GroupVersion().WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// CreateAll creates Kueue's objects for one test, in order, and deletes
// them when it ends.
func CreateAll(t testing.TB, c client.Client, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
}

// WaitActive waits until Kueue marks a ClusterQueue Active (flavors found,
// quota valid): it admits nothing into it before.
func WaitActive(t testing.TB, c client.Client, cq *unstructured.Unstructured) {
	t.Helper()
	testenv.Eventually(t, "ClusterQueue "+cq.GetName()+" is Active", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cq), cq); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(cq.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Active" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}
