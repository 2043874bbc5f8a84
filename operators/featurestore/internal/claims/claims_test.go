package claims

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

func TestBackendNames(t *testing.T) {
	for name, tc := range map[string]struct {
		spec featuresv1alpha1.FeatureStoreSpec
		want []string
	}{
		"none: all managed": {},
		"in spec order, online first": {
			spec: featuresv1alpha1.FeatureStoreSpec{
				OnlineStore:  featuresv1alpha1.StoreSource{Backend: "redis"},
				OfflineStore: featuresv1alpha1.StoreSource{Backend: "pg"},
				Registry:     featuresv1alpha1.StoreSource{Backend: "pg"},
			},
			want: []string{"redis", "pg", "pg"},
		},
		"a managed store in between is skipped": {
			spec: featuresv1alpha1.FeatureStoreSpec{
				OnlineStore: featuresv1alpha1.StoreSource{Backend: "redis"},
				Registry:    featuresv1alpha1.StoreSource{Backend: "pg"},
			},
			want: []string{"redis", "pg"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := BackendNames(&featuresv1alpha1.FeatureStore{Spec: tc.spec})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("BackendNames (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCleanupFailuresCountsByOrigin(t *testing.T) {
	a, b := NewCleanupFailures(), NewCleanupFailures()
	before := testutil.ToFloat64(a.vec.WithLabelValues("pending_cleanup"))
	a.Count("pending_cleanup")
	b.Count("pending_cleanup")
	if got := testutil.ToFloat64(a.vec.WithLabelValues("pending_cleanup")) - before; got != 2 {
		t.Errorf("two counters made in one process counted %v, want one shared series counting 2", got)
	}
	var none *CleanupFailures
	none.Count("featurestore") // a Reconciler built without one must not panic
}
