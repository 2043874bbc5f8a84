package featurestore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

func TestComputeStatus(t *testing.T) {
	ready := storeResult{outcome: outcomeReady, message: "ok", provisioned: &featuresv1alpha1.ProvisionedStore{Endpoint: "h:1"}}
	type want struct {
		ready, reconciling, stalled metav1.ConditionStatus
		reason                      string
		clientConfig                bool
	}
	for name, tc := range map[string]struct {
		obs  observations
		want want
	}{
		"all ready": {
			obs:  observations{online: ready, offline: ready, registry: ready, clientConfig: true},
			want: want{ready: metav1.ConditionTrue, reason: commonv1alpha1.ReasonReconciled, clientConfig: true},
		},
		"server down": {
			obs:  observations{online: storeResult{outcome: outcomeUnavailable, message: "down"}, offline: ready, registry: ready},
			want: want{ready: metav1.ConditionFalse, reconciling: metav1.ConditionTrue, reason: featuresv1alpha1.ReasonServerUnavailable},
		},
		"conflict wins over waiting": {
			obs:  observations{online: storeResult{outcome: outcomeWaiting}, offline: storeResult{outcome: outcomeConflict, message: "taken"}, registry: ready},
			want: want{ready: metav1.ConditionFalse, stalled: metav1.ConditionTrue, reason: featuresv1alpha1.ReasonConflict},
		},
		"backend of the wrong kind": {
			obs:  observations{online: ready, offline: ready, registry: storeResult{outcome: outcomeMismatch}},
			want: want{ready: metav1.ConditionFalse, stalled: metav1.ConditionTrue, reason: featuresv1alpha1.ReasonBackendMismatch},
		},
		"a backend whose server its clients cannot verify": {
			obs:  observations{online: ready, offline: storeResult{outcome: outcomeUnverifiable, message: "sslMode verify-ca"}, registry: ready},
			want: want{ready: metav1.ConditionFalse, stalled: metav1.ConditionTrue, reason: featuresv1alpha1.ReasonUnverifiableTLS},
		},
		"a child the API rejected": {
			obs:  observations{online: storeResult{outcome: outcomeRejected, message: "spec.replicas: Invalid"}, offline: ready, registry: ready},
			want: want{ready: metav1.ConditionFalse, stalled: metav1.ConditionTrue, reason: commonv1alpha1.ReasonChildRejected},
		},
		"credentials Secret taken by somebody else": {
			obs:  observations{credentials: &storeResult{outcome: outcomeNameTaken, message: "foreign"}},
			want: want{ready: metav1.ConditionFalse, stalled: metav1.ConditionTrue, reason: commonv1alpha1.ReasonNameTaken},
		},
		"credentials not written yet (API unavailable)": {
			obs:  observations{credentials: &storeResult{outcome: outcomeUnavailable, message: "timeout"}},
			want: want{ready: metav1.ConditionFalse, reconciling: metav1.ConditionTrue, reason: featuresv1alpha1.ReasonServerUnavailable},
		},
		"client configuration Secret taken by somebody else": {
			obs:  observations{online: ready, offline: ready, registry: ready, clientConfigErr: &apply.ForeignError{Kind: "Secret", Name: "x"}},
			want: want{ready: metav1.ConditionFalse, stalled: metav1.ConditionTrue, reason: commonv1alpha1.ReasonNameTaken},
		},
		"stores ready, configuration not yet written": {
			obs:  observations{online: ready, offline: ready, registry: ready},
			want: want{ready: metav1.ConditionFalse, reconciling: metav1.ConditionTrue, reason: commonv1alpha1.ReasonProgressing},
		},
	} {
		t.Run(name, func(t *testing.T) {
			fs := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Name: "fs", Generation: 3}}
			computeStatus(fs, tc.obs)
			status := func(ct string) metav1.ConditionStatus {
				if c := conditions.Get(fs, ct); c != nil {
					return c.Status
				}
				return ""
			}
			got := want{
				ready: status(commonv1alpha1.ConditionReady), reconciling: status(commonv1alpha1.ConditionReconciling),
				stalled: status(commonv1alpha1.ConditionStalled), reason: conditions.Get(fs, commonv1alpha1.ConditionReady).Reason,
				clientConfig: fs.Status.ClientConfig != nil,
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, c := range fs.Status.Conditions {
				if c.ObservedGeneration != 3 {
					t.Errorf("%s has observedGeneration %d", c.Type, c.ObservedGeneration)
				}
			}
		})
	}
}
