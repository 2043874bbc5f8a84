package progress_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// An upgrade from a chart that generated the Secret keeps it, and the
// operator, under the chart's RBAC alone, adopts it as is; it creates a
// new one only when the Secret is gone.
func TestChartUpgradeHandsTheSecretToTheOperator(t *testing.T) {
	const release, ns = "handover", "mlp-handover"
	const host = release + "-trainingjob-operator-progress." + ns + ".svc"
	key := types.NamespacedName{Namespace: ns, Name: release + "-trainingjob-operator-progress-tls"}
	c, _ := admin(t)
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	old := oldChartSecret(t, c, key, host, release)

	if _, err := charttest.Install(env.Config, chartDir(), release, ns, map[string]any{"crds": map[string]any{"enabled": false}}, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = charttest.Uninstall(env.Config, release, ns, t.Logf) })
	var kept corev1.Secret
	if err := c.Get(t.Context(), key, &kept); err != nil {
		t.Fatal(err)
	}
	if kept.Annotations["helm.sh/resource-policy"] != "keep" || !maps.EqualFunc(kept.Data, old.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("the upgrade did not keep the chart's Secret as it was: annotations %v", kept.Annotations)
	}

	operator, err := client.New(charttest.ImpersonateServiceAccount(env.Config, ns, release+"-trainingjob-operator"), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The operator writes its Secret under the chart's owned-objects
	// policy too, which the API server loads asynchronously.
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlabelled"}}
	testenv.Eventually(t, "the chart's owned-objects policy is in force", func(ctx context.Context) (bool, error) {
		err := operator.Create(ctx, unlabelled.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "owned-objects.training.mlplatform.dev"), nil
	})
	ca, err := progress.LoadSecret(t.Context(), operator, operator, key, host)
	if err != nil {
		t.Fatalf("the operator cannot read its Secret with the chart's RBAC: %v", err)
	}
	var adopted corev1.Secret
	if err := c.Get(t.Context(), key, &adopted); err != nil {
		t.Fatal(err)
	}
	if ca != string(old.Data["ca.crt"]) || adopted.ResourceVersion != kept.ResourceVersion {
		t.Error("the operator replaced the Secret the chart made instead of adopting it")
	}

	if err := c.Delete(t.Context(), &adopted); err != nil {
		t.Fatal(err)
	}
	ca, err = progress.LoadSecret(t.Context(), operator, operator, key, host)
	if err != nil {
		t.Fatalf("the operator cannot create its Secret with the chart's RBAC: %v", err)
	}
	if ca == "" || ca == string(old.Data["ca.crt"]) {
		t.Error("the operator did not make a new CA for a deleted Secret")
	}
	// The Role's update is for the endpoint's Secret alone.
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "credentials"}}
	if err := c.Create(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	other.Data = map[string][]byte{"password": []byte("replaced")}
	if err := operator.Update(t.Context(), other); !apierrors.IsForbidden(err) {
		t.Errorf("the chart lets the operator update other Secrets of its namespace: %v", err)
	}
}

// oldChartSecret creates the Secret as an earlier chart rendered it:
// owned by the release, with a CA and certificate for host.
func oldChartSecret(t *testing.T, c client.Client, key types.NamespacedName, host, release string) *corev1.Secret {
	t.Helper()
	scratch := types.NamespacedName{Namespace: key.Namespace, Name: "scratch"}
	if _, err := progress.LoadSecret(t.Context(), c, c, scratch, host); err != nil {
		t.Fatal(err)
	}
	var material corev1.Secret
	if err := c.Get(t.Context(), scratch, &material); err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
			Annotations: map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": key.Namespace},
		},
		Type: corev1.SecretTypeTLS,
		Data: material.Data,
	}
	if err := c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return s
}
