package manager

import (
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestWatchNamespacesFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		arg     string
		want    []string
		wantErr bool
	}{
		"two, with spaces": {arg: "team-a, team-b", want: []string{"team-a", "team-b"}},
		"empty":            {arg: "", want: nil},
		"not a namespace":  {arg: "Team_A", want: []string{"Team_A"}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cfg.BindFlags(fs)
			if err := fs.Parse([]string{"--watch-namespaces=" + tc.arg}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.WatchNamespaces); diff != "" {
				t.Errorf("WatchNamespaces (-want +got):\n%s", diff)
			}
			if err := cfg.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate: %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

// TestCacheWatchesOnlyWatchNamespaces runs a manager limited to one
// namespace: its cache holds that namespace's labelled objects and none of
// another namespace's, as a namespace-scoped install needs (its Roles
// forbid a cluster-wide watch).
func TestCacheWatchesOnlyWatchNamespaces(t *testing.T) {
	cs := adminClientset(t)
	const name = "namespaced-operator"
	watched, other := createNamespace(t, cs, "watched"), createNamespace(t, cs, "other")
	for _, ns := range []string{watched, other} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: ns, Labels: ManagedByLabels(name)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t)
	cfg.WatchNamespaces = []string{watched}
	mgr, err := New(cfg, Options{Name: name, OwnedObjects: []client.Object{&corev1.ConfigMap{}}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("cache did not start")
	}
	var list corev1.ConfigMapList
	if err := mgr.GetClient().List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cm := range list.Items {
		got = append(got, cm.Namespace)
	}
	if diff := cmp.Diff([]string{watched}, got); diff != "" {
		t.Errorf("namespaces of cached ConfigMaps (-want +got):\n%s", diff)
	}
}
