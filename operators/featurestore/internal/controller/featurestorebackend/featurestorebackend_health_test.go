package featurestorebackend

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/health"
	"github.com/ml-platform/ml-platform/shared/health/healthtest"
)

// TestHealthOfEveryState feeds the status functions every outcome of the
// server check and a blocked deletion, and checks what kstatus (Helm 4
// --wait, Flux) and the shipped Argo CD health check make of the result.
func TestHealthOfEveryState(t *testing.T) {
	for name, tc := range map[string]struct {
		outcome  outcome
		deleting bool
		kstatus  status.Status
		argo     string
	}{
		"connected":           {outcome: outcomeReady, kstatus: status.CurrentStatus, argo: health.Healthy},
		"Secret missing":      {outcome: outcomeSecretMissing, kstatus: status.InProgressStatus, argo: health.Progressing},
		"Secret invalid":      {outcome: outcomeSecretInvalid, kstatus: status.FailedStatus, argo: health.Degraded},
		"credentials refused": {outcome: outcomeRefused, kstatus: status.FailedStatus, argo: health.Degraded},
		"privileges missing":  {outcome: outcomeUnprivileged, kstatus: status.FailedStatus, argo: health.Degraded},
		"server unavailable":  {outcome: outcomeUnavailable, kstatus: status.InProgressStatus, argo: health.Progressing},
		"not yet checked":     {outcome: outcomeUnknown, kstatus: status.InProgressStatus, argo: health.Progressing},
		"deletion blocked":    {outcome: outcomeReady, deleting: true, kstatus: status.TerminatingStatus, argo: health.Progressing},
	} {
		t.Run(name, func(t *testing.T) {
			b := &featuresv1alpha1.FeatureStoreBackend{
				TypeMeta:   metav1.TypeMeta{APIVersion: featuresv1alpha1.GroupVersion.String(), Kind: "FeatureStoreBackend"},
				ObjectMeta: metav1.ObjectMeta{Name: "shared-postgres", Generation: 1},
			}
			computeStatus(b, observations{server: serverCheck{tc.outcome, "m"}})
			b.Status.ObservedGeneration = b.Generation // as the Runner stamps it
			if tc.deleting {
				now := metav1.Now()
				b.DeletionTimestamp = &now
				computeDeletionStatus(t, b, users{stores: []string{"team-a/sales"}})
			}
			healthtest.Expect(t, b, tc.kstatus, tc.argo)
		})
	}
}
