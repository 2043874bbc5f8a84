package featurestore

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/health"
	"github.com/ml-platform/ml-platform/shared/health/healthtest"
)

// TestHealthOfEveryState feeds computeStatus every outcome a store can
// have and checks what kstatus (Helm 4 --wait, Flux) and the shipped Argo
// CD health check make of the result.
func TestHealthOfEveryState(t *testing.T) {
	ready := storeResult{outcome: outcomeReady, message: "ok", provisioned: &featuresv1alpha1.ProvisionedStore{Endpoint: "h:1"}}
	other := func(o outcome) storeResult { return storeResult{outcome: o, message: "m"} }
	table := healthtest.NewTable(t, filepath.Join("..", "..", "..", "..", "..", "charts", "featurestore-operator", "files", "crds", "features.mlplatform.dev_featurestores.yaml"))
	for name, tc := range map[string]struct {
		obs     observations
		kstatus status.Status
		argo    string
	}{
		"ready":                        {observations{online: ready, offline: ready, registry: ready, clientConfig: true}, status.CurrentStatus, health.Healthy},
		"rotation deferred":            {observations{online: ready, offline: ready, registry: ready, clientConfig: true, rotationDeferred: true}, status.CurrentStatus, health.Healthy},
		"configuration not published":  {observations{online: ready, offline: ready, registry: ready}, status.InProgressStatus, health.Progressing},
		"managed server starting":      {observations{online: other(outcomeWaiting), offline: ready, registry: ready}, status.InProgressStatus, health.Progressing},
		"server unavailable":           {observations{online: ready, offline: other(outcomeUnavailable), registry: ready}, status.InProgressStatus, health.Progressing},
		"backend not found":            {observations{online: ready, offline: ready, registry: other(outcomeNotFound)}, status.InProgressStatus, health.Progressing},
		"backend of the wrong kind":    {observations{online: other(outcomeMismatch), offline: ready, registry: ready}, status.FailedStatus, health.Degraded},
		"name taken":                   {observations{online: ready, offline: other(outcomeNameTaken), registry: ready}, status.FailedStatus, health.Degraded},
		"database taken on the server": {observations{online: ready, offline: other(outcomeConflict), registry: ready}, status.FailedStatus, health.Degraded},
		"taken and unavailable":        {observations{online: other(outcomeUnavailable), offline: other(outcomeConflict), registry: ready}, status.FailedStatus, health.Degraded},
		"nothing observed yet":         {observations{}, status.InProgressStatus, health.Progressing},
	} {
		t.Run(name, func(t *testing.T) {
			fs := &featuresv1alpha1.FeatureStore{
				TypeMeta:   metav1.TypeMeta{APIVersion: featuresv1alpha1.GroupVersion.String(), Kind: "FeatureStore"},
				ObjectMeta: metav1.ObjectMeta{Name: "sales", Namespace: "team-a", Generation: 2},
			}
			fs.Spec.Project = "sales"
			computeStatus(fs, tc.obs)
			fs.Status.ObservedGeneration = fs.Generation // as the Runner stamps it
			healthtest.Expect(t, fs, tc.kstatus, tc.argo)
			table.Add(t, name, fs)
		})
	}
	table.Golden(t, filepath.Join("testdata", "health-table.md"))
}
