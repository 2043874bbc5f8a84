package featurestore

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

// TestServerPodsCarryTheLabelsOthersSelect: the pods of both managed
// servers of a FeatureStore carry the labels of featureref.ServerSelector
// for that store, which the Notebook operator's egress policy selects, and
// a server of another FeatureStore does not.
func TestServerPodsCarryTheLabelsOthersSelect(t *testing.T) {
	fs := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "sales"}}
	other := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	sel := labels.SelectorFromSet(featureref.ServerSelector("sales"))
	files := func(string) map[string][]byte { return map[string][]byte{"f": nil} }
	for _, m := range []managedServer{
		{name: managedPostgresName("sales"), port: featureref.PostgresPort, files: files, container: func(*corev1.Container) {}},
		{name: managedRedisName("sales"), port: featureref.RedisPort, files: files, container: func(*corev1.Container) {}},
	} {
		sts := serverStatefulSet(fs, m)
		if l := sts.Spec.Template.Labels; !sel.Matches(labels.Set(l)) {
			t.Errorf("pods of %s are labelled %v, which %v does not select", m.name, l, sel)
		}
		if l := serverStatefulSet(other, m).Spec.Template.Labels; sel.Matches(labels.Set(l)) {
			t.Errorf("a server of FeatureStore web, labelled %v, is selected as one of sales", l)
		}
	}
}
