package featurestore_test

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	fscontroller "github.com/ml-platform/ml-platform/operators/featurestore/internal/controller"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// operatorPodLabels stand for the chart's selector labels of the
// operator's pods (--operator-pod-labels).
var operatorPodLabels = map[string]string{"app.kubernetes.io/name": "featurestore-operator", "app.kubernetes.io/instance": "fs"}

func withNetworkPolicy(enabled bool) func(*featurestore.Reconciler) {
	return func(r *featurestore.Reconciler) {
		r.NetworkPolicy = featurestore.NetworkPolicyOptions{Enabled: enabled, OperatorPodLabels: operatorPodLabels}
	}
}

func fullyManagedStore(ns, name string) *featuresv1alpha1.FeatureStore {
	fs := newStore(ns, name, strings.ReplaceAll(name, "-", "_")).obj()
	fs.Spec.OnlineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	fs.Spec.OfflineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	fs.Spec.Registry = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	return fs
}

// waitPolicy waits for the NetworkPolicy of fs's managed servers whose UID
// is not notUID, and returns it.
func waitPolicy(t *testing.T, c client.Client, fs *featuresv1alpha1.FeatureStore, notUID types.UID) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	testenv.Eventually(t, "NetworkPolicy "+featurestore.NetworkPolicyName(fs.Name), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: fs.Namespace, Name: featurestore.NetworkPolicyName(fs.Name)}, np)
		return err == nil && np.UID != notUID, client.IgnoreNotFound(err)
	})
	return np
}

// waitServers waits for the StatefulSets of fs's managed servers and
// records their passwords for the package's secret scan.
func waitServers(t *testing.T, c client.Client, fs *featuresv1alpha1.FeatureStore) map[string]*appsv1.StatefulSet {
	t.Helper()
	out := map[string]*appsv1.StatefulSet{}
	for _, server := range []string{fs.Name + "-postgres", fs.Name + "-redis"} {
		sts := &appsv1.StatefulSet{}
		testenv.Eventually(t, "StatefulSet "+server, func(ctx context.Context) (bool, error) {
			return c.Get(ctx, client.ObjectKey{Namespace: fs.Namespace, Name: server}, sts) == nil, nil
		})
		out[server] = sts
	}
	recordPasswords(t, c, fs.Namespace)
	return out
}

// TestManagedServersNetworkPolicy: a FeatureStore with managed servers owns
// a NetworkPolicy that selects exactly its two servers' pods and admits to
// their ports only the operator's pods (its namespace and labels) and the
// pods of the store's namespace bound to the store; deleted by hand it is
// written again, and it goes with the store.
func TestManagedServersNetworkPolicy(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, withNetworkPolicy(true))
	fs := createStore(t, c, fullyManagedStore(ns, "guarded"))
	other := createStore(t, c, fullyManagedStore(ns, "other"))

	np := waitPolicy(t, c, fs, "")
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(fs), fs); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(np, fs) || np.Labels[commonv1alpha1.LabelManagedBy] != featurestore.OperatorName {
		t.Errorf("the policy is not the FeatureStore's child: owners %v labels %v", np.OwnerReferences, np.Labels)
	}
	selector, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	for store, want := range map[*featuresv1alpha1.FeatureStore]bool{fs: true, other: false} {
		for name, sts := range waitServers(t, c, store) {
			if got := selector.Matches(labels.Set(sts.Spec.Template.Labels)); got != want {
				t.Errorf("the policy of %s selects the pods of %s: %t, want %t", fs.Name, name, got, want)
			}
		}
	}
	tcp := corev1.ProtocolTCP
	want := networkingv1.NetworkPolicySpec{
		PodSelector: np.Spec.PodSelector,
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{
				{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: operatorNamespace}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: operatorPodLabels},
				},
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bound.features.mlplatform.dev/guarded": "true"}}},
			},
			Ports: []networkingv1.NetworkPolicyPort{
				{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(5432))},
				{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(6379))},
			},
		}},
	}
	if diff := cmp.Diff(want, np.Spec); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	if otherNP := waitPolicy(t, c, other, ""); cmp.Equal(otherNP.Spec.Ingress, np.Spec.Ingress) {
		t.Error("two stores admit the same pods: the binding label must name the store")
	}

	if err := c.Delete(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	again := waitPolicy(t, c, fs, np.UID)
	if diff := cmp.Diff(np.Spec, again.Spec); diff != "" {
		t.Errorf("the policy written again differs (-before +after):\n%s", diff)
	}
	t.Logf("deleted by hand, NetworkPolicy %s came back as %s", np.UID, again.UID)

	// The garbage collector removes the policy with its FeatureStore.
	if err := c.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, fs)
	testenv.WaitGone(t, c, again)
}

// TestForeignNetworkPolicyIsRefusedVisibly: a NetworkPolicy of the managed
// servers' policy's name that the FeatureStore does not control is left as
// it is, and the store says so: Stalled/NameTaken naming it, a NameTaken
// event, not Ready.
func TestForeignNetworkPolicyIsRefusedVisibly(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	foreign := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: featurestore.NetworkPolicyName("taken"), Labels: map[string]string{"team": "a"}},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}}},
	}
	if err := c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	startOperator(t, withNetworkPolicy(true))
	fs := createStore(t, c, fullyManagedStore(ns, "taken"))

	got := waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, commonv1alpha1.ReasonNameTaken)
	waitServers(t, c, fs)
	if msg := conditions.Get(got, commonv1alpha1.ConditionStalled).Message; !strings.Contains(msg, "NetworkPolicy "+foreign.Name) {
		t.Errorf("Stalled message %q does not name the NetworkPolicy", msg)
	}
	if conditions.IsTrue(got, commonv1alpha1.ConditionReady) {
		t.Error("a store whose servers run without their policy is Ready")
	}
	if ev := testenv.WaitForEvent(t, c, got, commonv1alpha1.ReasonNameTaken); ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, foreign.Name) {
		t.Errorf("event %s %q, want a Warning naming the NetworkPolicy", ev.Type, ev.Message)
	}
	live := &networkingv1.NetworkPolicy{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(foreign), live); err != nil {
		t.Fatal(err)
	}
	if len(live.OwnerReferences) != 0 || !cmp.Equal(live.Spec, foreign.Spec) || live.Labels[commonv1alpha1.LabelManagedBy] != "" {
		t.Errorf("the foreign policy was changed: owners %v labels %v spec %+v", live.OwnerReferences, live.Labels, live.Spec)
	}
}

// TestNetworkPolicySwitchedOffIsDeleted: an operator started with the
// policies off deletes those it made, and leaves a store without them.
func TestNetworkPolicySwitchedOffIsDeleted(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	on := startOperator(t, withNetworkPolicy(true))
	fs := createStore(t, c, fullyManagedStore(ns, "switched"))
	np := waitPolicy(t, c, fs, "")
	waitServers(t, c, fs)
	on.stop(t)

	startOperator(t, withNetworkPolicy(false))
	testenv.Eventually(t, "the policy to go", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(np), &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// TestChartManagedServersNetworkPolicyValue: the chart turns the policy on
// by default and off with managed.networkPolicy.enabled=false, and the
// operator reads from its arguments its own pods' selector labels, those
// the chart's Deployment gives them.
func TestChartManagedServersNetworkPolicyValue(t *testing.T) {
	optionsFor := func(values map[string]any) (*fscontroller.Options, appsv1.Deployment) {
		t.Helper()
		out, err := charttest.Render(chartDir, "fs", operatorNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		deployments, err := charttest.Objects[appsv1.Deployment](out, "Deployment")
		if err != nil || len(deployments) != 1 {
			t.Fatalf("want one Deployment, got %d (%v)", len(deployments), err)
		}
		d := deployments[0]
		opts := &fscontroller.Options{}
		flags := flag.NewFlagSet("operator", flag.ContinueOnError)
		opts.BindFlags(flags)
		var ours []string
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "="); flags.Lookup(name) != nil {
				ours = append(ours, a)
			}
		}
		if err := flags.Parse(ours); err != nil {
			t.Fatal(err)
		}
		return opts, d
	}
	on, d := optionsFor(nil)
	if !on.NetworkPolicy.Enabled {
		t.Error("the managed servers' NetworkPolicy is off by default")
	}
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, on.NetworkPolicy.OperatorPodLabels); diff != "" || len(on.NetworkPolicy.OperatorPodLabels) == 0 {
		t.Errorf("the operator's pod labels (-Deployment selector +flag):\n%s", diff)
	}
	if !labels.SelectorFromSet(on.NetworkPolicy.OperatorPodLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("--operator-pod-labels %v do not select the operator's pods %v", on.NetworkPolicy.OperatorPodLabels, d.Spec.Template.Labels)
	}
	if off, _ := optionsFor(map[string]any{"managed": map[string]any{"networkPolicy": map[string]any{"enabled": false}}}); off.NetworkPolicy.Enabled {
		t.Error("managed.networkPolicy.enabled=false leaves the policy on")
	}
	if _, err := charttest.Render(chartDir, "fs", operatorNamespace, map[string]any{"managed": map[string]any{"networkPolicy": map[string]any{"enable": false}}}); err == nil {
		t.Error("the schema accepted an unknown key under managed.networkPolicy")
	}
}

// TestChartServiceAccountWritesTheManagedServersPolicy: the operator,
// running as the chart's ServiceAccount (its RBAC and its owned-objects
// admission policy), writes a managed store's NetworkPolicy, and that
// ServiceAccount cannot write a NetworkPolicy that is not labelled as the
// operator's.
func TestChartServiceAccountWritesTheManagedServersPolicy(t *testing.T) {
	c := adminClient()
	installChart(t)
	sa := charttest.ImpersonateServiceAccount(env.Config, operatorNamespace, "fs-featurestore-operator")
	ns := testenv.CreateNamespace(t, c, "fs")
	asOperator, err := client.New(sa, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the owned-objects policy to refuse a tenant's NetworkPolicy", func(ctx context.Context) (bool, error) {
		tenants := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenants"}}
		err := asOperator.Create(ctx, tenants, client.DryRunAll)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
	})
	startScopedOperator(t, sa, operatorNamespace, nil, withNetworkPolicy(true))
	fs := createStore(t, c, fullyManagedStore(ns, "chart-sa"))
	waitServers(t, c, fs)
	np := waitPolicy(t, c, fs, "")
	if err := c.Delete(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, c, fs, np.UID)
}
