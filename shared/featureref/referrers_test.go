package featureref

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// TestReferrersMapsAStoreToItsReferrersInItsNamespace: a FeatureStore
// wakes the objects that name it in its own namespace, and no other.
// ConfigMaps stand in for Notebooks and TrainingJobs, their references
// read from an annotation.
func TestReferrersMapsAStoreToItsReferrersInItsNamespace(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	referrer := func(ns, name, stores string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"stores": stores}}}
	}
	refs := func(cm *corev1.ConfigMap) []commonv1alpha1.FeatureStoreReference {
		var out []commonv1alpha1.FeatureStoreReference
		for _, n := range strings.Fields(cm.Annotations["stores"]) {
			out = append(out, commonv1alpha1.FeatureStoreReference{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: n}})
		}
		return out
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(referrer("a", "both", "sales ads"), referrer("a", "ads-only", "ads"), referrer("a", "sales-only", "sales"), referrer("b", "elsewhere", "sales")).
		WithIndex(&corev1.ConfigMap{}, IndexKey, func(o client.Object) []string { return IndexValues(refs(o.(*corev1.ConfigMap))) }).
		Build()
	store := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "sales"}}

	got := Referrers(c, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })(t.Context(), store)
	want := []reconcile.Request{
		{NamespacedName: client.ObjectKey{Namespace: "a", Name: "both"}},
		{NamespacedName: client.ObjectKey{Namespace: "a", Name: "sales-only"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("referrers (-want +got):\n%s", diff)
	}
}
