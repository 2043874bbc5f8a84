package cleanup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	featurestesting "github.com/ml-platform/ml-platform/apis/features/v1alpha1/testing"
)

func condition(t, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason}
}

// A FeatureStore of an operator older than the record gets one inferred
// from its status on upgrade: only a store the old operator demonstrably
// never took to its server is left out.
func TestInferredRecordOfAnOlderOperatorsStore(t *testing.T) {
	provisioned := &featuresv1alpha1.ProvisionedStore{Endpoint: "db:5432"}
	all := featuresv1alpha1.ProvisioningRecord{OnlineStoreBackend: "redis", OfflineStoreBackend: "pg", RegistryBackend: "pg"}
	cases := map[string]struct {
		status featuresv1alpha1.FeatureStoreStatus
		want   featuresv1alpha1.ProvisioningRecord
	}{
		"never reconciled": {},
		"provisioned, its backends now gone": {
			status: featuresv1alpha1.FeatureStoreStatus{
				OnlineStore: provisioned, OfflineStore: provisioned, Registry: provisioned,
				Conditions: []metav1.Condition{
					condition(featuresv1alpha1.ConditionOnlineStoreReady, commonv1alpha1.ReasonDependencyNotFound),
					condition(featuresv1alpha1.ConditionOfflineStoreReady, featuresv1alpha1.ReasonBackendMismatch),
				},
			},
			want: all,
		},
		"backend missing or of the other kind, nothing provisioned": {
			status: featuresv1alpha1.FeatureStoreStatus{Registry: provisioned, Conditions: []metav1.Condition{
				condition(featuresv1alpha1.ConditionOnlineStoreReady, commonv1alpha1.ReasonDependencyNotFound),
				condition(featuresv1alpha1.ConditionOfflineStoreReady, featuresv1alpha1.ReasonBackendMismatch),
			}},
			want: featuresv1alpha1.ProvisioningRecord{RegistryBackend: "pg"},
		},
		"server down in the middle of provisioning": {
			status: featuresv1alpha1.FeatureStoreStatus{Conditions: []metav1.Condition{
				condition(featuresv1alpha1.ConditionOnlineStoreReady, featuresv1alpha1.ReasonServerUnavailable),
				condition(featuresv1alpha1.ConditionOfflineStoreReady, featuresv1alpha1.ReasonConflict),
				condition(featuresv1alpha1.ConditionRegistryReady, commonv1alpha1.ReasonProgressing),
			}},
			want: all,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := featurestesting.MakeFeatureStore("ns", "fs", "p").Backends("redis", "pg").Obj()
			fs.Status = tc.status
			if diff := cmp.Diff(tc.want, RecordOf(fs)); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

// The record, once there, is the plan: a store not in it is not cleaned
// up, whatever the spec names.
func TestProvisionedPlanFollowsTheRecord(t *testing.T) {
	fs := featurestesting.MakeFeatureStore("ns", "fs", "p").Backends("redis", "pg").Obj()
	fs.Status.Provisioning = &featuresv1alpha1.ProvisioningRecord{OfflineStoreBackend: "pg"}
	p := ProvisionedPlan(fs)
	if p.Redis != "" || p.Postgres[KindOffline] != "pg" || p.Postgres[KindRegistry] != "" || len(Retained(p)) != 1 {
		t.Errorf("plan %+v from record %+v", p, fs.Status.Provisioning)
	}
	fs.Status.Provisioning = &featuresv1alpha1.ProvisioningRecord{}
	if p := ProvisionedPlan(fs); !p.Empty() {
		t.Errorf("an empty record plans %+v", p)
	}
}
