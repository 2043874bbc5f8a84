package notebook

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "notebook-operator") }

func TestChartLints(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults": nil,
		"everything on": {
			"metrics":   map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			"notebooks": map[string]any{"ingress": map[string]any{"enabled": true, "host": "nb.example.com", "tlsSecretName": "tls"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := charttest.Lint(chartDir(), values); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestChartSchemaRejectsUnknownKeys(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"top level":              {"bogus": true},
		"nested":                 {"notebooks": map[string]any{"culling": map[string]any{"idleTimout": "1h"}}},
		"bad duration":           {"notebooks": map[string]any{"reportInterval": "ten minutes"}},
		"ingress without a host": {"notebooks": map[string]any{"ingress": map[string]any{"enabled": true}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := charttest.Render(chartDir(), "nb", "mlp-system", values); err == nil {
				t.Fatal("the chart accepted invalid values")
			}
		})
	}
	// The umbrella chart passes these.
	if _, err := charttest.Render(chartDir(), "nb", "mlp-system", map[string]any{"enabled": true, "global": map[string]any{"x": 1}}); err != nil {
		t.Fatal(err)
	}
}

// TestChartConfigLoads feeds the rendered configuration to the operator's
// own loader, which refuses unknown keys: chart and operator agree.
func TestChartConfigLoads(t *testing.T) {
	cfg, manifest := chartConfig(t, map[string]any{
		"notebooks": map[string]any{"culling": map[string]any{"idleTimeout": "2h"}},
	})
	crdKept := false
	for _, doc := range charttest.Documents(manifest) {
		if strings.Contains(doc, "kind: CustomResourceDefinition") && strings.Contains(doc, "helm.sh/resource-policy: keep") {
			crdKept = true
		}
	}
	if !crdKept {
		t.Error("the rendered CRD is not kept on uninstall")
	}
	if cfg.Culling.IdleTimeout.Hours() != 2 || cfg.NetworkPolicy.OperatorNamespace != "mlp-system" || cfg.NetworkPolicy.OperatorPodLabels["app.kubernetes.io/name"] != "notebook-operator" {
		t.Errorf("loaded configuration %+v", cfg)
	}
}

// TestChartEgressValuesReachTheOperator: the chart's notebook egress is off
// by default with kube-dns as DNS; turned on with a listed destination and
// other DNS pods' labels, the operator loads exactly those (the labels
// replacing the default's, which Helm would merge with a default map), and
// the schema refuses an egress rule with an unknown key and DNS without a
// namespace.
func TestChartEgressValuesReachTheOperator(t *testing.T) {
	cfg, _ := chartConfig(t, nil)
	if e := cfg.NetworkPolicy.Egress; e.Enabled || e.DNS.Namespace != "kube-system" || !maps.Equal(e.DNS.PodLabels, map[string]string{"k8s-app": "kube-dns"}) || len(e.To) != 0 {
		t.Errorf("default egress %+v, want off with kube-dns in kube-system", e)
	}
	cfg, _ = chartConfig(t, map[string]any{"notebooks": map[string]any{"networkPolicy": map[string]any{"egress": map[string]any{
		"enabled": true,
		"dns":     map[string]any{"namespace": "dns", "podLabels": map[string]any{"app": "coredns"}},
		"to": []any{map[string]any{
			"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.20.0.0/16"}}},
			"ports": []any{map[string]any{"port": 443, "protocol": "TCP"}},
		}},
	}}}})
	e := cfg.NetworkPolicy.Egress
	if !e.Enabled || e.DNS.Namespace != "dns" || !maps.Equal(e.DNS.PodLabels, map[string]string{"app": "coredns"}) ||
		len(e.To) != 1 || e.To[0].To[0].IPBlock.CIDR != "10.20.0.0/16" || e.To[0].Ports[0].Port.IntValue() != 443 {
		t.Errorf("egress %+v, want the chart's values", e)
	}
	for name, bad := range map[string]map[string]any{
		"unknown rule key":      {"egress": map[string]any{"to": []any{map[string]any{"from": []any{}}}}},
		"DNS without namespace": {"egress": map[string]any{"dns": map[string]any{"namespace": ""}}},
	} {
		if _, err := charttest.Render(chartDir(), "nb", "mlp-system", map[string]any{"notebooks": map[string]any{"networkPolicy": bad}}); err == nil {
			t.Errorf("%s: values %v must be rejected", name, bad)
		}
	}
}

// chartConfig renders the chart with values and loads the operator
// configuration it renders, as the operator would at start.
func chartConfig(t *testing.T, values map[string]any) (config.Config, string) {
	t.Helper()
	manifest, err := charttest.Render(chartDir(), "nb", "mlp-system", values)
	if err != nil {
		t.Fatal(err)
	}
	var cm *corev1.ConfigMap
	for _, doc := range charttest.Documents(manifest) {
		if !strings.Contains(doc, "kind: ConfigMap") {
			continue
		}
		cm = &corev1.ConfigMap{}
		if err := yaml.Unmarshal([]byte(doc), cm); err != nil {
			t.Fatal(err)
		}
	}
	if cm == nil {
		t.Fatal("the chart renders no ConfigMap")
	}
	dir := t.TempDir()
	for _, key := range []string{"config.yaml", "accelerators.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(cm.Data[key]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, manifest
}

// TestChartIngressValuesCreateIngresses turns the chart's Ingress on and
// runs the operator with the configuration the chart renders: every
// Notebook gets an Ingress and reports its URL, and turning it off again
// removes both.
func TestChartIngressValuesCreateIngresses(t *testing.T) {
	cfg, _ := chartConfig(t, map[string]any{"notebooks": map[string]any{"ingress": map[string]any{
		"enabled": true, "className": "nginx", "host": "notebooks.example.com", "tlsSecretName": "notebooks-tls",
		"annotations": map[string]any{"nginx.ingress.kubernetes.io/proxy-body-size": "0"},
	}}})
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{config: &cfg})
	nb := runningNotebook(t, c, op, newNotebook(ns, "web"), t0)

	if want := "https://notebooks.example.com/notebook/" + ns + "/web/"; nb.Status.IngressURL != want {
		t.Errorf("status.ingressURL = %q, want %q", nb.Status.IngressURL, want)
	}
	ing := &networkingv1.Ingress{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(nb), ing); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(ing, nb) || ing.Labels["app.kubernetes.io/managed-by"] != render.OperatorName {
		t.Errorf("the Ingress is not the Notebook's: owners %v labels %v", ing.OwnerReferences, ing.Labels)
	}
	want := networkingv1.IngressSpec{
		IngressClassName: ptr.To("nginx"),
		TLS:              []networkingv1.IngressTLS{{Hosts: []string{"notebooks.example.com"}, SecretName: "notebooks-tls"}},
		Rules: []networkingv1.IngressRule{{
			Host: "notebooks.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/notebook/" + ns + "/web/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: render.PortName}}},
			}}}},
		}},
	}
	if diff := cmp.Diff(want, ing.Spec); diff != "" {
		t.Errorf("Ingress spec (-want +got):\n%s", diff)
	}
	if ing.Annotations["nginx.ingress.kubernetes.io/proxy-body-size"] != "0" {
		t.Errorf("Ingress annotations %v lack the chart's", ing.Annotations)
	}

	// Settled with an Ingress: checks cost no writes.
	waitCached(t, op, nb, func(got *notebooksv1alpha1.Notebook) bool { return got.Status.IngressURL != "" })
	op.Writes.Reset()
	op.reconcile(t, nb)
	if n := op.writesIn(nb.Namespace).Total(); n != 0 {
		t.Fatalf("a settled Notebook with an Ingress wrote: %s", op.writesIn(nb.Namespace))
	}

	// The platform team turns the Ingress off.
	op.Stop(t)
	op = startOperator(t, operatorOptions{})
	op.prober.set(nb, idleAt(t0))
	op.reconcile(t, nb)
	testenv.Eventually(t, "the Ingress is deleted", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(nb), &networkingv1.Ingress{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	waitNotebook(t, c, nb, "no ingress URL", func(nb *notebooksv1alpha1.Notebook) bool { return nb.Status.IngressURL == "" })
}

// TestChartInstallsAndItsServiceAccountSuffices installs the chart with the
// Helm SDK and runs integration tests with the operator impersonating the
// chart's ServiceAccount, so the generated RBAC is exactly enough.
func TestChartInstallsAndItsServiceAccountSuffices(t *testing.T) {
	const release, ns = "notebook-operator", "mlp-notebook-system"
	// The CRD is installed by the test environment already.
	if _, err := charttest.Install(env.Config, chartDir(), release, ns, map[string]any{"crds": map[string]any{"enabled": false}}, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = charttest.Uninstall(env.Config, release, ns, t.Logf) })

	operatorConfig = charttest.ImpersonateServiceAccount(env.Config, ns, release)
	defer func() { operatorConfig = nil }()
	// The subtests run the operator under the chart's owned-objects policy,
	// which the API server loads asynchronously: one that ran before it is
	// in force would prove nothing of it.
	waitPolicyInForce(t, testenv.NewClient(t, operatorConfig, scheme), ns)
	t.Run("GrantsNoMoreThanNeeded", func(t *testing.T) { grantsNoMoreThanNeeded(t, testenv.NewClient(t, operatorConfig, scheme)) })
	t.Run("RefusesForeignWrites", func(t *testing.T) {
		refusesForeignWrites(t, env.AdminClient(t, scheme), testenv.NewClient(t, operatorConfig, scheme))
	})
	for name, test := range map[string]func(*testing.T){
		"OwnedObjectsAndReady":            TestOwnedObjectsAndReady,
		"SuspendAndResume":                TestSuspendAndResume,
		"CullingWarnsCullsAndRestarts":    TestCullingWarnsCullsAndRestarts,
		"PodStartFailureIsReported":       TestPodStartFailureIsReported,
		"QuotaRejectionIsReported":        TestQuotaRejectionIsReported,
		"MissingFeatureStoreDoesNotBlock": TestMissingFeatureStoreDoesNotBlock,
	} {
		t.Run(name, test)
	}
}

// grantsNoMoreThanNeeded asks the API server what the chart's
// ServiceAccount may do: what the operator needs is allowed (the
// integration tests it runs as that ServiceAccount prove it is enough),
// and nearby permissions it does not need are not.
func grantsNoMoreThanNeeded(t *testing.T, c client.Client) {
	for name, tc := range map[string]struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		"create secrets":            {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "create", Namespace: "team"}, true},
		"watch secrets":             {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch"}, true},
		"update secrets":            {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "update", Namespace: "team"}, false},
		"patch secrets":             {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "patch", Namespace: "team"}, false},
		"delete secrets":            {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "delete", Namespace: "team"}, false},
		"deletecollection secrets":  {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "deletecollection", Namespace: "team"}, false},
		"watch events":              {authorizationv1.ResourceAttributes{Resource: "events", Verb: "watch"}, true},
		"delete events":             {authorizationv1.ResourceAttributes{Resource: "events", Verb: "delete", Namespace: "team"}, false},
		"read configmaps":           {authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "get", Namespace: "team"}, false},
		"create pods":               {authorizationv1.ResourceAttributes{Resource: "pods", Verb: "create", Namespace: "team"}, false},
		"patch statefulsets":        {authorizationv1.ResourceAttributes{Group: "apps", Resource: "statefulsets", Verb: "patch", Namespace: "team"}, true},
		"delete statefulsets":       {authorizationv1.ResourceAttributes{Group: "apps", Resource: "statefulsets", Verb: "delete", Namespace: "team"}, false},
		"delete workspaces":         {authorizationv1.ResourceAttributes{Resource: "persistentvolumeclaims", Verb: "delete", Namespace: "team"}, false},
		"patch notebook status":     {authorizationv1.ResourceAttributes{Group: "notebooks.mlplatform.dev", Resource: "notebooks", Subresource: "status", Verb: "patch"}, true},
		"patch notebook spec":       {authorizationv1.ResourceAttributes{Group: "notebooks.mlplatform.dev", Resource: "notebooks", Verb: "patch"}, false},
		"create featurestores":      {authorizationv1.ResourceAttributes{Group: "features.mlplatform.dev", Resource: "featurestores", Verb: "create"}, false},
		"bind roles":                {authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Verb: "bind"}, false},
		"leases in other namespace": {authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: "default"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &tc.attrs}}
			if err := c.Create(t.Context(), review); err != nil {
				t.Fatal(err)
			}
			if review.Status.Allowed != tc.want {
				t.Errorf("allowed = %v, want %v (%s)", review.Status.Allowed, tc.want, review.Status.Reason)
			}
		})
	}
}

// TestChartOperatorNetworkPolicyAdmitsOnlyTheScraper: the operator's own
// pods get an ingress NetworkPolicy that admits the health port from
// everywhere and the metrics port only from networkPolicy.metricsFrom (by
// default the Prometheus Operator's pods); networkPolicy.enabled=false drops
// it. The Notebooks' own policies are the operator's, not the chart's.
func TestChartOperatorNetworkPolicyAdmitsOnlyTheScraper(t *testing.T) {
	policies := func(values map[string]any) []networkingv1.NetworkPolicy {
		t.Helper()
		out, err := charttest.Render(chartDir(), "nb", "mlp-system", values)
		if err != nil {
			t.Fatal(err)
		}
		nps, err := charttest.Objects[networkingv1.NetworkPolicy](out, "NetworkPolicy")
		if err != nil {
			t.Fatal(err)
		}
		return nps
	}
	nps := policies(map[string]any{"networkPolicy": map[string]any{"metricsFrom": []any{
		map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}},
	}}})
	if len(nps) != 1 {
		t.Fatalf("want one NetworkPolicy, got %d", len(nps))
	}
	if got := nps[0].Spec.PodSelector.MatchLabels["app.kubernetes.io/name"]; got != "notebook-operator" {
		t.Errorf("the policy selects app.kubernetes.io/name=%q, want the operator's pods", got)
	}
	peers, err := charttest.IngressPeers(nps[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]string{8081: "[]", 8443: `[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`}
	if diff := cmp.Diff(want, peers); diff != "" {
		t.Errorf("ingress peers by port (-want +got):\n%s", diff)
	}
	if n := len(policies(map[string]any{"networkPolicy": map[string]any{"enabled": false}})); n != 0 {
		t.Errorf("networkPolicy.enabled=false renders %d NetworkPolicies, want none", n)
	}
}
