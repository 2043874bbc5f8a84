package featurestore_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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

var (
	chartOnce      sync.Once
	chartInstalled error
)

// installChart installs the chart into the test environment once for the
// package; its admission policy then applies to every later test, which
// the administrator client passes.
func installChart(t *testing.T) {
	t.Helper()
	chartOnce.Do(func() {
		// The test environment installed the CRDs already.
		_, chartInstalled = charttest.Install(env.Config, chartDir, "fs", operatorNamespace, map[string]any{"crds": map[string]any{"enabled": false}}, t.Logf)
		if chartInstalled == nil {
			chartInstalled = waitOwnedObjectsPolicy()
		}
	})
	if chartInstalled != nil {
		t.Fatalf("installing the chart: %v", chartInstalled)
	}
}

// waitOwnedObjectsPolicy waits until the chart's owned-objects policy
// refuses the operator's ServiceAccount an unlabelled ConfigMap: the API
// server loads a new policy asynchronously, and a test that ran the
// operator before it was in force would prove nothing of it.
func waitOwnedObjectsPolicy() error {
	op, err := client.New(charttest.ImpersonateServiceAccount(env.Config, operatorNamespace, "fs-featurestore-operator"), client.Options{})
	if err != nil {
		return err
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "policy-probe"}}
	return wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return deniedByOwnedObjectsPolicy(op.Create(ctx, probe.DeepCopy(), client.DryRunAll)), nil
	})
}

// tenantClient acts as a ServiceAccount of namespace ns bound to the
// built-in edit role there, as a tenant is.
func tenantClient(t *testing.T, c client.Client, ns, name string) client.Client {
	t.Helper()
	actOutAggregation(t, c, "edit")
	tenantSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	for _, o := range []client.Object{tenantSA, binding} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	tenant, err := client.New(charttest.ImpersonateServiceAccount(env.Config, ns, name), client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return tenant
}

func TestChartInstallsAndItsServiceAccountRunsTheOperator(t *testing.T) {
	c := adminClient()
	installChart(t)
	sa := charttest.ImpersonateServiceAccount(env.Config, operatorNamespace, "fs-featurestore-operator")
	ns := testenv.CreateNamespace(t, c, "fs")
	startScopedOperator(t, sa, operatorNamespace, nil, nil)
	fs := waitReady(t, c, createStore(t, c, newStore(ns, "chart", "chart").obj()))
	testenv.WaitForEvent(t, c, fs, "Ready")
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, fs)

	// A tenant with the aggregated edit role uses FeatureStores in its
	// namespace but cannot read the backends' admin Secrets.
	tenant := tenantClient(t, c, ns, "tenant")
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

// TestChartShipsTheAbandonPolicyForItsGroup checks the chart's admission
// policy against the repository-wide one in deploy/admission: the same CEL,
// matching only features.mlplatform.dev, and a ClusterRole for the verb
// that nothing binds.
func TestChartShipsTheAbandonPolicyForItsGroup(t *testing.T) {
	manifest, err := charttest.Render(chartDir, "fs", operatorNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	deployed, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "..", "deploy", "admission", "abandon-cleanup.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := admissionPolicy(t, manifest), admissionPolicy(t, string(deployed))
	if ours.Name != "abandon-cleanup.features.mlplatform.dev" {
		t.Errorf("policy name %q", ours.Name)
	}
	rules := ours.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].APIGroups, []string{"features.mlplatform.dev"}) {
		t.Errorf("the policy does not match only features.mlplatform.dev: %+v", rules)
	}
	// The deny message names the chart's ClusterRole instead of the
	// repository-wide one; everything else is the same CEL.
	for i := range ours.Spec.Validations {
		ours.Spec.Validations[i].MessageExpression = strings.ReplaceAll(ours.Spec.Validations[i].MessageExpression,
			"fs-featurestore-operator-abandon-cleanup", "mlplatform-abandon-cleanup")
	}
	if diff := cmp.Diff(theirs.Spec.Validations, ours.Spec.Validations); diff != "" {
		t.Errorf("validations differ from deploy/admission (-theirs +ours):\n%s", diff)
	}
	if diff := cmp.Diff(theirs.Spec.MatchConditions, ours.Spec.MatchConditions); diff != "" {
		t.Errorf("match conditions differ from deploy/admission (-theirs +ours):\n%s", diff)
	}
	if diff := cmp.Diff(theirs.Spec.Variables, ours.Spec.Variables); diff != "" {
		t.Errorf("variables differ from deploy/admission (-theirs +ours):\n%s", diff)
	}
	if !strings.Contains(manifest, "kind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: abandon-cleanup.features.mlplatform.dev") ||
		!strings.Contains(manifest, "policyName: abandon-cleanup.features.mlplatform.dev") {
		t.Error("the policy binding is missing")
	}
	if !strings.Contains(manifest, "name: fs-featurestore-operator-abandon-cleanup") || !strings.Contains(manifest, `verbs: ["abandon-cleanup"]`) {
		t.Error("the ClusterRole granting abandon-cleanup is missing")
	}
	if strings.Count(manifest, "name: fs-featurestore-operator-abandon-cleanup") != 1 {
		t.Error("the abandon-cleanup ClusterRole is bound by default")
	}
	off, err := charttest.Render(chartDir, "fs", operatorNamespace, map[string]any{"abandonCleanup": map[string]any{"policy": false}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(off, "name: abandon-cleanup.features.mlplatform.dev") || !strings.Contains(off, "name: fs-featurestore-operator-abandon-cleanup") {
		t.Error("abandonCleanup.policy=false must drop the policy and keep the ClusterRole")
	}
}

func admissionPolicy(t *testing.T, manifest string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---") {
		if !strings.Contains(doc, "kind: ValidatingAdmissionPolicy\n") {
			continue
		}
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Fatal("no ValidatingAdmissionPolicy in the manifest")
	return nil
}

// TestChartOperatorNetworkPolicyAdmitsOnlyTheScraper: the operator's pods
// get an ingress NetworkPolicy that admits the health port from everywhere
// and the metrics port only from the Prometheus Operator's pods (the default
// networkPolicy.metricsFrom); networkPolicy.enabled=false drops it.
func TestChartOperatorNetworkPolicyAdmitsOnlyTheScraper(t *testing.T) {
	policies := func(values map[string]any) []networkingv1.NetworkPolicy {
		t.Helper()
		out, err := charttest.Render(chartDir, "fs", operatorNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		nps, err := charttest.Objects[networkingv1.NetworkPolicy](out, "NetworkPolicy")
		if err != nil {
			t.Fatal(err)
		}
		return nps
	}
	nps := policies(nil)
	if len(nps) != 1 {
		t.Fatalf("want one NetworkPolicy, got %d", len(nps))
	}
	if got := nps[0].Spec.PodSelector.MatchLabels["app.kubernetes.io/name"]; got != "featurestore-operator" {
		t.Errorf("the policy selects app.kubernetes.io/name=%q, want the operator's pods", got)
	}
	peers, err := charttest.IngressPeers(nps[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]string{8081: "[]", 8443: `[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"prometheus"}},"namespaceSelector":{}}]`}
	if diff := cmp.Diff(want, peers); diff != "" {
		t.Errorf("ingress peers by port (-want +got):\n%s", diff)
	}
	if n := len(policies(map[string]any{"networkPolicy": map[string]any{"enabled": false}})); n != 0 {
		t.Errorf("networkPolicy.enabled=false renders %d NetworkPolicies, want none", n)
	}
}

// TestChartNotesSayToDeleteStoresBeforeUninstalling renders the NOTES with
// the CRDs kept and deleted: uninstalling removes the operator, after which
// nothing releases a FeatureStore's finalizer, so the NOTES say to delete
// the stores first and how to recover from uninstalling before, and never
// that uninstalling deletes the stores.
func TestChartNotesSayToDeleteStoresBeforeUninstalling(t *testing.T) {
	for name, tc := range map[string]struct {
		keep  bool
		stuck string
	}{
		"CRDs kept":    {keep: true, stuck: "the namespace stays Terminating"},
		"CRDs deleted": {keep: false, stuck: "the CRDs, and the namespaces of\nthose stores, hang in deletion"},
	} {
		t.Run(name, func(t *testing.T) {
			notes, err := charttest.Notes(chartDir, "fs", operatorNamespace, map[string]any{"crds": map[string]any{"keep": tc.keep}})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				"Before uninstalling this release, delete every FeatureStore",
				"kubectl delete featurestores.features.mlplatform.dev --all --all-namespaces --wait",
				"kubectl delete featurestorebackends.features.mlplatform.dev --all --wait",
				"reinstall the chart",
				`kubectl -n team-a patch featurestores.features.mlplatform.dev/sales --type=merge -p '{"metadata":{"finalizers":null}}'`,
				"leaves its PostgreSQL databases and roles and its Redis user and keys on the servers",
				tc.stuck,
			} {
				if !strings.Contains(notes, want) {
					t.Errorf("the NOTES lack %q:\n%s", want, notes)
				}
			}
			if strings.Contains(notes, "with them every FeatureStore") {
				t.Errorf("the NOTES claim that uninstalling deletes the FeatureStores:\n%s", notes)
			}
		})
	}
}
