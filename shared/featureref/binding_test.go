package featureref

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// TestBindingLabelIsValidAndOnePerStore: every valid store name, up to the
// 253 characters of a DNS subdomain, gives a valid label key, and no two
// stores share one, including a store named like another's hashed key
// (object names never hold the '_' of the hashed form).
func TestBindingLabelIsValidAndOnePerStore(t *testing.T) {
	long := strings.Repeat("a", 63)
	longest := strings.Repeat(strings.Repeat("b", 62)+".", 5)[:253]
	hashedLong := commonv1alpha1.FeatureStoreBindingLabel(long + "a")
	lookalike := strings.NewReplacer("_", "-").Replace(strings.TrimPrefix(hashedLong, commonv1alpha1.FeatureStoreBindingLabelPrefix))
	keys := map[string]string{}
	for _, store := range []string{"sales", "a.b", "a-b", long, long + "a", long + "b", longest, lookalike} {
		key := commonv1alpha1.FeatureStoreBindingLabel(store)
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			t.Errorf("FeatureStoreBindingLabel(%q) = %q: %v", store, key, errs)
		}
		if !commonv1alpha1.IsFeatureStoreBindingLabel(key) {
			t.Errorf("IsFeatureStoreBindingLabel(%q) = false", key)
		}
		if other, dup := keys[key]; dup {
			t.Errorf("stores %q and %q share the label %q", other, store, key)
		}
		keys[key] = store
	}
	if got := commonv1alpha1.FeatureStoreBindingLabel("sales"); got != "bound.features.mlplatform.dev/sales" {
		t.Errorf("a short name is readable in its key: got %q", got)
	}
}

// TestBindReplacesEveryBindingLabel: Bind labels a pod for each store it
// mounts, removes binding labels that no resolved store gave (such as one
// a user wrote into a pod template) and keeps every other label.
func TestBindReplacesEveryBindingLabel(t *testing.T) {
	cases := map[string]struct {
		stores []Store
		want   map[string]string
	}{
		"two stores": {
			stores: []Store{{Name: "sales"}, {Name: "ads"}},
			want: map[string]string{
				"team":                                "vision",
				"bound.features.mlplatform.dev/sales": "true",
				"bound.features.mlplatform.dev/ads":   "true",
			},
		},
		"no store": {want: map[string]string{"team": "vision"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			labels := map[string]string{
				"team": "vision",
				commonv1alpha1.FeatureStoreBindingLabel("someone-elses"): "true",
				commonv1alpha1.FeatureStoreBindingLabel("sales"):         "yes",
			}
			Bind(labels, tc.stores)
			if diff := cmp.Diff(tc.want, labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}
