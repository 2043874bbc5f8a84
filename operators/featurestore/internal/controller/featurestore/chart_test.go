package featurestore_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var chartDir = filepath.Join("..", "..", "..", "..", "..", "charts", "featurestore-operator")

func TestChartLintsAndRejectsUnknownValues(t *testing.T) {
	if err := charttest.Lint(chartDir, nil); err != nil {
		t.Fatalf("lint: %v", err)
	}
	if _, err := charttest.Render(chartDir, "fs", operatorNamespace, map[string]any{"credentials": map[string]any{"rotationGrace": "1m"}}); err == nil {
		t.Fatal("the schema accepted an unknown key")
	}
	if _, err := charttest.Render(chartDir, "fs", operatorNamespace, map[string]any{"enabled": true, "global": map[string]any{"x": 1}}); err != nil {
		t.Fatalf("the umbrella's enabled and global values: %v", err)
	}
	manifest, err := charttest.Render(chartDir, "fs", operatorNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--operator-namespace=" + operatorNamespace, "helm.sh/resource-policy: keep", "readOnlyRootFilesystem: true", "kind: CustomResourceDefinition"} {
		if !strings.Contains(manifest, want) {
			t.Errorf("the rendered chart lacks %q", want)
		}
	}
}

func TestChartInstallsAndItsServiceAccountRunsTheOperator(t *testing.T) {
	c := adminClient()
	// The test environment installed the CRDs already.
	if _, err := charttest.Install(env.Config, chartDir, "fs", operatorNamespace, map[string]any{"crds": map[string]any{"enabled": false}}, t.Logf); err != nil {
		t.Fatalf("installing the chart: %v", err)
	}
	sa := charttest.ImpersonateServiceAccount(env.Config, operatorNamespace, "fs-featurestore-operator")
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperatorAs(t, sa, nil)
	fs := waitReady(t, c, createStore(t, c, newStore(ns, "chart", "chart").obj()))
	testenv.WaitForEvent(t, c, fs, "Ready")
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, fs)

	// A tenant with the aggregated edit role uses FeatureStores in its
	// namespace but cannot read the backends' admin Secrets.
	actOutAggregation(t, c, "edit")
	tenantSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}},
	}
	for _, o := range []client.Object{tenantSA, binding} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	tenant, err := client.New(charttest.ImpersonateServiceAccount(env.Config, ns, "tenant"), client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the tenant may create FeatureStores", func(ctx context.Context) (bool, error) {
		return tenant.Create(ctx, newStore(ns, "tenant", "tenant").obj(), client.DryRunAll) == nil, nil
	})
	if err := tenant.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: "pg-admin"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant reading the PostgreSQL admin Secret: %v, want Forbidden", err)
	}
	if err := tenant.List(t.Context(), &corev1.SecretList{}, client.InNamespace(operatorNamespace)); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant listing Secrets of the operator's namespace: %v, want Forbidden", err)
	}
	if err := tenant.Update(t.Context(), &featuresv1alpha1.FeatureStoreBackend{ObjectMeta: metav1.ObjectMeta{Name: pgBackend}}, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant changing a backend: %v, want Forbidden", err)
	}
}

// actOutAggregation does what kube-controller-manager's ClusterRole
// aggregation controller does for one role, which the test environment
// does not run: it sets the rules to those of every ClusterRole its
// aggregationRule selects.
func actOutAggregation(t *testing.T, c client.Client, name string) {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, role); err != nil {
		t.Fatal(err)
	}
	if role.AggregationRule == nil {
		t.Fatalf("ClusterRole %s has no aggregation rule", name)
	}
	var rules []rbacv1.PolicyRule
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		list := &rbacv1.ClusterRoleList{}
		if err := c.List(t.Context(), list, client.MatchingLabelsSelector{Selector: s}); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			if r.Name != name {
				rules = append(rules, r.Rules...)
			}
		}
	}
	if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "featurestores") }) {
		t.Fatalf("no aggregated rule for featurestores among %d rules", len(rules))
	}
	role.Rules = rules
	if err := c.Update(t.Context(), role); err != nil {
		t.Fatal(err)
	}
}
