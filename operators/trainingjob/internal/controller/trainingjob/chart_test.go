package trainingjob

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ml-platform/ml-platform/shared/charttest"
)

func TestChartLintsAndRejectsUnknownValues(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":        nil,
		"umbrella keys":   {"enabled": true, "global": map[string]any{"x": 1}},
		"service monitor": {"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}},
		"no crds":         {"crds": map[string]any{"enabled": false}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := charttest.Lint(chartDir(), values); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := charttest.Render(chartDir(), "r", "ns", map[string]any{"bogus": 1}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("an unknown top-level key must be rejected, got %v", err)
	}
	if _, err := charttest.Render(chartDir(), "r", "ns", map[string]any{"crds": map[string]any{"kep": true}}); err == nil {
		t.Error("an unknown nested key must be rejected")
	}
}

func TestChartRendersCRDsWithTheirUpgradeStory(t *testing.T) {
	out, err := charttest.Render(chartDir(), "r", "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	var crds []string
	for _, doc := range charttest.Documents(out) {
		if strings.Contains(doc, "kind: CustomResourceDefinition") {
			crds = append(crds, doc)
		}
	}
	if len(crds) != 1 || !strings.Contains(crds[0], "trainingjobs.training.mlplatform.dev") || !strings.Contains(crds[0], "helm.sh/resource-policy: keep") {
		t.Fatalf("want the TrainingJob CRD kept on uninstall, got %d CRDs", len(crds))
	}
	out, err = charttest.Render(chartDir(), "r", "ns", map[string]any{"crds": map[string]any{"keep": false}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "helm.sh/resource-policy") {
		t.Error("crds.keep=false must drop the keep annotation")
	}
	for _, want := range []string{"--leader-elect=true", "--metrics-bind-address=:8443", "runAsNonRoot: true", "readOnlyRootFilesystem: true", "aggregate-to-edit"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart lacks %q", want)
		}
	}
}

// TestChartGrantsNoMoreThanNeeded asks the API server what the chart's
// ServiceAccount may do: what the operator needs is allowed (the
// integration tests prove it is enough), and nearby permissions it does
// not need are not.
func TestChartGrantsNoMoreThanNeeded(t *testing.T) {
	cs, err := kubernetes.NewForConfig(operatorConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		"watch trainingjobs":       {authorizationv1.ResourceAttributes{Group: "training.mlplatform.dev", Resource: "trainingjobs", Verb: "watch"}, true},
		"patch trainingjob status": {authorizationv1.ResourceAttributes{Group: "training.mlplatform.dev", Resource: "trainingjobs", Subresource: "status", Verb: "patch"}, true},
		"create tokenreviews":      {authorizationv1.ResourceAttributes{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}, true},
		"create pytorchjobs":       {authorizationv1.ResourceAttributes{Group: "kubeflow.org", Resource: "pytorchjobs", Verb: "create"}, true},
		"deletecollection pods":    {authorizationv1.ResourceAttributes{Resource: "pods", Verb: "deletecollection"}, true},
		"update trainingjob spec":  {authorizationv1.ResourceAttributes{Group: "training.mlplatform.dev", Resource: "trainingjobs", Verb: "update"}, false},
		"patch trainingjob spec":   {authorizationv1.ResourceAttributes{Group: "training.mlplatform.dev", Resource: "trainingjobs", Verb: "patch"}, false},
		"create trainingjobs":      {authorizationv1.ResourceAttributes{Group: "training.mlplatform.dev", Resource: "trainingjobs", Verb: "create"}, false},
		"delete pytorchjobs":       {authorizationv1.ResourceAttributes{Group: "kubeflow.org", Resource: "pytorchjobs", Verb: "delete"}, true},
		"create checkpoint claims": {authorizationv1.ResourceAttributes{Resource: "persistentvolumeclaims", Verb: "create"}, true},
		"delete checkpoint claims": {authorizationv1.ResourceAttributes{Resource: "persistentvolumeclaims", Verb: "delete"}, false},
		"update pytorchjobs":       {authorizationv1.ResourceAttributes{Group: "kubeflow.org", Resource: "pytorchjobs", Verb: "update"}, false},
		"create mpijobs":           {authorizationv1.ResourceAttributes{Group: "kubeflow.org", Resource: "mpijobs", Verb: "create"}, true},
		"create mxjobs":            {authorizationv1.ResourceAttributes{Group: "kubeflow.org", Resource: "mxjobs", Verb: "create"}, false},
		"create pods":              {authorizationv1.ResourceAttributes{Resource: "pods", Verb: "create"}, false},
		// The ranks' host names (package rankdns): the slices are written
		// whole; the Services that own them are only created.
		"update endpointslices": {authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "update"}, true},
		"patch endpointslices":  {authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "patch"}, false},
		"create endpoints":      {authorizationv1.ResourceAttributes{Resource: "endpoints", Verb: "create"}, false},
		"update services":       {authorizationv1.ResourceAttributes{Resource: "services", Verb: "update"}, false},
		// The MPI key pair's Secret is watched, to generate it again when
		// deleted; the operator's cache holds only the Secrets it labelled.
		"watch secrets (mpi keys)":    {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch"}, true},
		"create secrets (mpi keys)":   {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "create"}, true},
		"update secrets":              {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "update"}, false},
		"delete secrets":              {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "delete"}, false},
		"create featurestores":        {authorizationv1.ResourceAttributes{Group: "features.mlplatform.dev", Resource: "featurestores", Verb: "create"}, false},
		"watch events (pod refusals)": {authorizationv1.ResourceAttributes{Resource: "events", Verb: "watch"}, true},
		"watch crds (kubeflow later)": {authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "watch"}, true},
		"update crds":                 {authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "update"}, false},
		"leases in its namespace":     {authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: chartNamespace}, true},
		"leases in other namespace":   {authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: "default"}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &tc.attrs}}
			got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), review, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Allowed != tc.want {
				t.Errorf("allowed = %v, want %v (%s)", got.Status.Allowed, tc.want, got.Status.Reason)
			}
		})
	}
}

func TestChartInstallsKubeflowAlongsideWhenAsked(t *testing.T) {
	values := map[string]any{"kubeflow": map[string]any{"enabled": true}}
	if err := charttest.Lint(chartDir(), values); err != nil {
		t.Fatal(err)
	}
	out, err := charttest.Render(chartDir(), "r", "ns", values)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"name: pytorchjobs.kubeflow.org", "name: tfjobs.kubeflow.org", "name: xgboostjobs.kubeflow.org", "name: paddlejobs.kubeflow.org",
		"name: mpijobs.kubeflow.org", "--enable-scheme=mpijob", "--mpi-kubectl-delivery-image=ml-platform/mpi:4.1",
		"name: validator.training-operator.kubeflow.org", "name: validator.pytorchjob.training-operator.kubeflow.org",
		"--enable-scheme=pytorchjob", "--webhook-secret-name=r-trainingjob-operator-kubeflow-webhook-cert",
		"kind: ValidatingWebhookConfiguration", `resources: ["validatingwebhookconfigurations"]`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart lacks %q", want)
		}
	}
	if strings.Contains(out, "mxjobs.kubeflow.org") || strings.Contains(out, "validator.mxjob") {
		t.Error("only the five frameworks the platform runs are installed")
	}
	out, err = charttest.Render(chartDir(), "r", "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "kubeflow.org") && strings.Contains(out, "kind: ValidatingWebhookConfiguration") {
		t.Error("the Kubeflow training-operator is off by default")
	}
}

func TestChartPassesClientLimitsAndWorkers(t *testing.T) {
	values := map[string]any{"apiClient": map[string]any{"qps": 120, "burst": 240}, "concurrentReconciles": 3}
	out, err := charttest.Render(chartDir(), "r", "ns", values)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--kube-api-qps=120", "--kube-api-burst=240", "--max-concurrent-reconciles=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart lacks %q", want)
		}
	}
	for name, bad := range map[string]map[string]any{
		"zero qps":     {"apiClient": map[string]any{"qps": 0}},
		"zero workers": {"concurrentReconciles": 0},
		"unknown key":  {"apiClient": map[string]any{"qsp": 10}},
	} {
		if _, err := charttest.Render(chartDir(), "r", "ns", bad); err == nil {
			t.Errorf("%s: values %v must be rejected", name, bad)
		}
	}
}

// TestChartTurnsOnFastHandoverWithStandbys: warm standbys are on by
// default whatever the replicas (a rolling update's new pod is the one
// replica's standby, ready only once warm), as is the priority queue, and
// a value set either way wins; an empty warmStandby means on.
func TestChartTurnsOnFastHandoverWithStandbys(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   []string
	}{
		"one replica":  {map[string]any{}, []string{"--warm-standby=true", "--priority-queue=true"}},
		"two replicas": {map[string]any{"replicas": 2}, []string{"--warm-standby=true", "--priority-queue=true"}},
		"two, queue off": {map[string]any{"replicas": 2, "priorityQueue": false},
			[]string{"--warm-standby=true", "--priority-queue=false"}},
		"one, warm empty": {map[string]any{"leaderElection": map[string]any{"warmStandby": nil}},
			[]string{"--warm-standby=true", "--priority-queue=true"}},
		"one, warm off": {map[string]any{"leaderElection": map[string]any{"warmStandby": false}},
			[]string{"--warm-standby=false", "--priority-queue=true"}},
		"two, warm off": {map[string]any{"replicas": 2, "leaderElection": map[string]any{"warmStandby": false}},
			[]string{"--warm-standby=false", "--priority-queue=true"}},
	} {
		out, err := charttest.Render(chartDir(), "r", "ns", tc.values)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: rendered chart lacks %q", name, want)
			}
		}
	}
	if _, err := charttest.Render(chartDir(), "r", "ns", map[string]any{"priorityQueue": "yes"}); err == nil {
		t.Error("priorityQueue: \"yes\" must be rejected")
	}
}

// TestChartKeepsTheGoRuntimeWithinTheMemoryLimit: with a memory limit the
// operator gets the container's limit from the downward API and keeps its
// runtime below it (--memory-limit); without one it is told nothing, since
// the downward API would give the node's memory.
func TestChartKeepsTheGoRuntimeWithinTheMemoryLimit(t *testing.T) {
	manager := func(values map[string]any) corev1.Container {
		t.Helper()
		out, err := charttest.Render(chartDir(), "r", "ns", values)
		if err != nil {
			t.Fatal(err)
		}
		deployments, err := charttest.Objects[appsv1.Deployment](out, "Deployment")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				if d.Name == "r-trainingjob-operator" && c.Name == "manager" {
					return c
				}
			}
		}
		t.Fatal("no operator Deployment with a manager container rendered")
		return corev1.Container{}
	}
	limitEnv := func(c corev1.Container) *corev1.EnvVar {
		for i, e := range c.Env {
			if e.Name == "MLP_MEMORY_LIMIT" {
				return &c.Env[i]
			}
		}
		return nil
	}
	c := manager(nil)
	if !slices.Contains(c.Args, "--memory-limit=$(MLP_MEMORY_LIMIT)") {
		t.Errorf("args %v lack --memory-limit=$(MLP_MEMORY_LIMIT)", c.Args)
	}
	e := limitEnv(c)
	if e == nil || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil ||
		e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" || e.ValueFrom.ResourceFieldRef.ContainerName != "manager" {
		t.Errorf("MLP_MEMORY_LIMIT is %+v, want the manager container's limits.memory from the downward API", e)
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Error("the chart's default sets no memory limit; the test assumes one")
	}
	c = manager(map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": nil}}})
	if limitEnv(c) != nil || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--memory-limit") }) {
		t.Errorf("without a memory limit the operator is still told one: args %v", c.Args)
	}
}

// TestChartRollsTheOperatorWhenKubeflowIsEnabled: the pod template changes
// with kubeflow.enabled, so an upgrade that turns Kubeflow on restarts the
// operator even where it could not pick the CRDs up by itself.
func TestChartRollsTheOperatorWhenKubeflowIsEnabled(t *testing.T) {
	template := func(values map[string]any) string {
		t.Helper()
		out, err := charttest.Render(chartDir(), "r", "ns", values)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range charttest.Documents(out) {
			if _, tmpl, ok := strings.Cut(doc, "  template:"); ok && strings.Contains(doc, "kind: Deployment") && strings.Contains(doc, "name: r-trainingjob-operator\n") {
				return tmpl
			}
		}
		t.Fatal("no operator Deployment rendered")
		return ""
	}
	off := template(nil)
	on := template(map[string]any{"kubeflow": map[string]any{"enabled": true}})
	if off == on || !strings.Contains(on, "checksum/backends:") {
		t.Errorf("the operator's pod template does not change with kubeflow.enabled:\n%s", on)
	}
}

// TestChartNetworkPolicyAdmitsScraperAndTrainingPods: the operator's pods
// get an ingress NetworkPolicy whose rules are exactly the health port for
// everyone, the metrics port for the scraper (metricsFrom) and the progress
// port for training pods of every namespace and the operator's replicas;
// progress.enabled=false drops the progress rule and
// networkPolicy.enabled=false the policy.
func TestChartNetworkPolicyAdmitsScraperAndTrainingPods(t *testing.T) {
	policy := func(values map[string]any) []networkingv1.NetworkPolicy {
		t.Helper()
		out, err := charttest.Render(chartDir(), "r", "ns", values)
		if err != nil {
			t.Fatal(err)
		}
		policies, err := charttest.Objects[networkingv1.NetworkPolicy](out, "NetworkPolicy")
		if err != nil {
			t.Fatal(err)
		}
		return policies
	}
	policies := policy(nil)
	if len(policies) != 1 {
		t.Fatalf("want one NetworkPolicy, got %d", len(policies))
	}
	np := policies[0]
	selector := map[string]string{"app.kubernetes.io/name": "trainingjob-operator", "app.kubernetes.io/instance": "r"}
	if !maps.Equal(np.Spec.PodSelector.MatchLabels, selector) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("the policy selects %v for %v, want the operator's pods %v for ingress", np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes, selector)
	}
	want := map[int32]string{
		8081: "[]",
		8443: `[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"prometheus"}},"namespaceSelector":{}}]`,
		9443: `[{"podSelector":{"matchLabels":{"app.kubernetes.io/managed-by":"trainingjob-operator"}},"namespaceSelector":{}},` +
			`{"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"r","app.kubernetes.io/name":"trainingjob-operator"}}}]`,
	}
	if got := ingressPeers(t, np); !maps.Equal(got, want) {
		t.Errorf("ingress rules by port:\n got %v\nwant %v", got, want)
	}

	np = policy(map[string]any{"progress": map[string]any{"enabled": false}})[0]
	if _, ok := ingressPeers(t, np)[9443]; ok {
		t.Error("progress.enabled=false must drop the progress port's rule")
	}
	if n := len(policy(map[string]any{"networkPolicy": map[string]any{"enabled": false}})); n != 0 {
		t.Errorf("networkPolicy.enabled=false renders %d NetworkPolicies, want none", n)
	}
}

func ingressPeers(t *testing.T, np networkingv1.NetworkPolicy) map[int32]string {
	t.Helper()
	peers, err := charttest.IngressPeers(np)
	if err != nil {
		t.Fatal(err)
	}
	return peers
}

// TestChartPassesTheRankNetworkPolicySwitch: the operator makes the ranks'
// NetworkPolicies by default (--rank-network-policy=true) and not with
// trainingPods.networkPolicy.enabled=false; the value's schema refuses
// anything but a boolean and unknown keys.
func TestChartPassesTheRankNetworkPolicySwitch(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"default": {want: "--rank-network-policy=true"},
		"off":     {values: map[string]any{"trainingPods": map[string]any{"networkPolicy": map[string]any{"enabled": false}}}, want: "--rank-network-policy=false"},
	} {
		out, err := charttest.Render(chartDir(), "r", "ns", tc.values)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := strings.Count(out, "--rank-network-policy="); n != 1 || !strings.Contains(out, "- "+tc.want+"\n") {
			t.Errorf("%s: want the operator's argument %s once, found %d --rank-network-policy arguments", name, tc.want, n)
		}
	}
	for name, bad := range map[string]map[string]any{
		"not a boolean": {"trainingPods": map[string]any{"networkPolicy": map[string]any{"enabled": "no"}}},
		"unknown key":   {"trainingPods": map[string]any{"networkPolicy": map[string]any{"enable": true}}},
	} {
		if _, err := charttest.Render(chartDir(), "r", "ns", bad); err == nil {
			t.Errorf("%s: values %v must be rejected", name, bad)
		}
	}
}
