package featurestore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

// TestManagedPostgresFollowsTheManagedStore: the offline store and the
// registry share one managed PostgreSQL, sized by whichever of them is
// managed; when both are, by the offline store's settings, and different
// settings of the registry are reported as ignored.
func TestManagedPostgresFollowsTheManagedStore(t *testing.T) {
	sized := func(storage, class string) *featuresv1alpha1.ManagedServer {
		return &featuresv1alpha1.ManagedServer{Storage: ptr.To(resource.MustParse(storage)), StorageClassName: ptr.To(class)}
	}
	type want struct {
		storage string
		class   *string
	}
	for name, tc := range map[string]struct {
		offline, registry featuresv1alpha1.StoreSource
		want              want
		wantIgnored       bool
	}{
		"registry managed, offline store on a backend": {
			offline:  featuresv1alpha1.StoreSource{Backend: "pg"},
			registry: featuresv1alpha1.StoreSource{Managed: sized("50Gi", "fast")},
			want:     want{storage: "50Gi", class: ptr.To("fast")},
		},
		"offline store managed, registry on a backend": {
			offline:  featuresv1alpha1.StoreSource{Managed: sized("20Gi", "slow")},
			registry: featuresv1alpha1.StoreSource{Backend: "pg"},
			want:     want{storage: "20Gi", class: ptr.To("slow")},
		},
		"both managed: the offline store's settings": {
			offline:     featuresv1alpha1.StoreSource{Managed: sized("20Gi", "slow")},
			registry:    featuresv1alpha1.StoreSource{Managed: sized("50Gi", "fast")},
			want:        want{storage: "20Gi", class: ptr.To("slow")},
			wantIgnored: true,
		},
		"both managed alike": {
			offline:  featuresv1alpha1.StoreSource{Managed: sized("50Gi", "fast")},
			registry: featuresv1alpha1.StoreSource{Managed: sized("50Gi", "fast")},
			want:     want{storage: "50Gi", class: ptr.To("fast")},
		},
		"managed without settings": {
			offline:  featuresv1alpha1.StoreSource{Backend: "pg"},
			registry: featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}},
			want:     want{storage: "1Gi"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			fs := &featuresv1alpha1.FeatureStore{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "sales"},
				Spec:       featuresv1alpha1.FeatureStoreSpec{OfflineStore: tc.offline, Registry: tc.registry},
			}
			r := &Reconciler{Images: Images{Postgres: "postgres:15"}}
			claim := serverStatefulSet(fs, r.managedPostgres(fs)).Spec.VolumeClaimTemplates[0]
			got := want{storage: claim.Spec.Resources.Requests.Storage().String(), class: claim.Spec.StorageClassName}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("the data volume's claim (-want +got):\n%s", diff)
			}
			if got := registrySettingsIgnored(fs); got != tc.wantIgnored {
				t.Errorf("registrySettingsIgnored = %v, want %v", got, tc.wantIgnored)
			}
		})
	}
}
