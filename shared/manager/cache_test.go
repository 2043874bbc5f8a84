package manager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestCacheHoldsOnlyManagedOwnedObjects(t *testing.T) {
	cs := adminClientset(t)
	ns := createNamespace(t, cs, "cache")
	const name = "cache-test-operator"
	for cmName, labels := range map[string]map[string]string{
		"managed":         ManagedByLabels(name),
		"managed-by-else": ManagedByLabels("another-operator"),
		"unlabelled":      nil,
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: ns, Labels: labels}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Secrets are not listed as owned, so their cache is not restricted.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-credentials", Namespace: ns}}
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	mgr, err := New(testConfig(t), Options{Name: name, OwnedObjects: []client.Object{&corev1.ConfigMap{}}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	c := mgr.GetClient()

	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("cache did not start")
	}
	var configMaps corev1.ConfigMapList
	// The first List starts the informer and waits for its sync, so it
	// returns every object the cache will ever hold of those created above.
	if err := c.List(t.Context(), &configMaps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var cached []string
	for _, cm := range configMaps.Items {
		cached = append(cached, cm.Name)
		if len(cm.ManagedFields) != 0 {
			t.Errorf("cached ConfigMap %s still has managedFields", cm.Name)
		}
	}
	if diff := cmp.Diff([]string{"managed"}, cached); diff != "" {
		t.Errorf("cached ConfigMaps (-want +got):\n%s", diff)
	}

	var unlabelled corev1.ConfigMap
	if err := mgr.GetAPIReader().Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "unlabelled"}, &unlabelled); err != nil {
		t.Errorf("the API reader cannot read an unlabelled ConfigMap: %v", err)
	}
	var cachedSecret corev1.Secret
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: secret.Name}, &cachedSecret); err != nil {
		t.Errorf("an unlabelled Secret, a kind not listed as owned, is not in the cache: %v", err)
	}
}

func TestWritesCarryOperatorFieldManager(t *testing.T) {
	cs := adminClientset(t)
	ns := createNamespace(t, cs, "field-manager")
	const name = "field-manager-test-operator"
	mgr, err := New(testConfig(t), Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)

	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "created", Namespace: ns, Labels: ManagedByLabels(name)}}
	if err := mgr.GetClient().Create(t.Context(), created); err != nil {
		t.Fatal(err)
	}
	// Server-side apply fails without a field manager, so this write
	// succeeds only if the client supplies one itself.
	applied := corev1ac.ConfigMap("applied", ns).WithLabels(ManagedByLabels(name)).WithData(map[string]string{"k": "v"})
	if err := mgr.GetClient().Apply(t.Context(), applied); err != nil {
		t.Fatalf("server-side apply without an explicit field owner: %v", err)
	}

	got := map[string][]string{}
	for _, cmName := range []string{"created", "applied"} {
		live, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), cmName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range live.ManagedFields {
			got[cmName] = append(got[cmName], mf.Manager+" "+string(mf.Operation))
		}
	}
	want := map[string][]string{
		"created": {name + " Update"},
		"applied": {name + " Apply"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("field managers of objects the operator wrote (-want +got):\n%s", diff)
	}
}
