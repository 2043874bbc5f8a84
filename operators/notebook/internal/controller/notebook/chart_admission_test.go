package notebook

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// deniedByPolicy reports whether err is the chart's owned-objects policy
// refusing a request, rather than RBAC or validation.
func deniedByPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "owned-objects.notebooks.mlplatform.dev")
}

// waitPolicyInForce waits until the chart's owned-objects policy refuses
// op an unlabelled Service in namespace ns: the API server loads a new
// policy asynchronously.
func waitPolicyInForce(t *testing.T, op client.Client, ns string) {
	t.Helper()
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy-probe"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	testenv.Eventually(t, "the owned-objects policy is in force", func(ctx context.Context) (bool, error) {
		return deniedByPolicy(op.Create(ctx, probe.DeepCopy(), client.DryRunAll)), nil
	})
}

func tenantObjects(ns string) (*appsv1.StatefulSet, *corev1.Service, *corev1.PersistentVolumeClaim, *networkingv1.NetworkPolicy) {
	sel := map[string]string{"app": "tenant"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-db"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: sel},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}}},
	}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-db"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-deny-all"}}
	return sts, svc, pvc, np
}

// refusesForeignWrites checks the chart's ValidatingAdmissionPolicy: the
// operator's ServiceAccount cannot change, adopt or delete objects it did
// not create, even of kinds RBAC lets it write, nor create unlabelled ones,
// in a tenant's namespace or in kube-system, nor, labelled or not, what
// would lend it the cluster's credentials (a ServiceAccount's token
// Secret, a StatefulSet in kube-system, a Service with external IPs); it
// can still create its own, and other users are not affected.
func refusesForeignWrites(t *testing.T, admin, op client.Client) {
	ns := testenv.CreateNamespace(t, admin, "tenant")
	sts, svc, pvc, np := tenantObjects(ns)
	for _, o := range []client.Object{sts, svc, pvc, np} {
		if err := admin.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	waitPolicyInForce(t, op, ns)

	adopt := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"notebook-operator"}}}`))
	for name, write := range map[string]func(ctx context.Context) error{
		"adopt a tenant's StatefulSet by labelling it": func(ctx context.Context) error { return op.Patch(ctx, sts.DeepCopy(), adopt) },
		"scale a tenant's StatefulSet": func(ctx context.Context) error {
			return op.Patch(ctx, sts.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)))
		},
		"patch a tenant's Service":        func(ctx context.Context) error { return op.Patch(ctx, svc.DeepCopy(), adopt) },
		"patch a tenant's claim":          func(ctx context.Context) error { return op.Patch(ctx, pvc.DeepCopy(), adopt) },
		"delete a tenant's NetworkPolicy": func(ctx context.Context) error { return op.Delete(ctx, np.DeepCopy()) },
		"create an unlabelled Service":    func(ctx context.Context) error { return op.Create(ctx, unlabelled(svc, "new"), client.DryRunAll) },
		"create an unlabelled Secret in kube-system": func(ctx context.Context) error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "planted"}}, client.DryRunAll)
		},
		"create a labelled token Secret for a kube-system ServiceAccount": func(ctx context.Context) error {
			return op.Create(ctx, tokenSecret("kube-system", "clusterrole-aggregation-controller"), client.DryRunAll)
		},
		"create a labelled token Secret for a tenant's ServiceAccount": func(ctx context.Context) error {
			return op.Create(ctx, tokenSecret(ns, "default"), client.DryRunAll)
		},
		"create a labelled StatefulSet in kube-system": func(ctx context.Context) error {
			s := sts.DeepCopy()
			s.ObjectMeta = ownMeta("kube-system", "planted")
			s.Spec.Template.Spec.ServiceAccountName = "clusterrole-aggregation-controller"
			return op.Create(ctx, s, client.DryRunAll)
		},
		"create a labelled Service with external IPs": func(ctx context.Context) error {
			s := unlabelled(svc, "planted")
			s.Labels = ownMeta(ns, "").Labels
			s.Spec.ExternalIPs = []string{"203.0.113.7"}
			return op.Create(ctx, s, client.DryRunAll)
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := write(t.Context()); !deniedByPolicy(err) {
				t.Errorf("got %v, want the owned-objects policy's refusal", err)
			}
		})
	}
	// RBAC already refuses what the policy would: the operator has no
	// verb to change Secrets at all.
	if err := op.Update(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "planted"}}); !apierrors.IsForbidden(err) {
		t.Errorf("updating a kube-system Secret: %v, want Forbidden", err)
	}

	own := unlabelled(svc, "own")
	own.Labels = ownMeta(ns, "").Labels
	if err := op.Create(t.Context(), own); err != nil {
		t.Fatalf("the operator creating its own Service: %v", err)
	}
	if err := op.Create(t.Context(), &corev1.Secret{ObjectMeta: ownMeta(ns, "own"), Type: corev1.SecretTypeOpaque}, client.DryRunAll); err != nil {
		t.Errorf("the operator creating its own Opaque Secret: %v", err)
	}
	strip := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`))
	if err := op.Patch(t.Context(), own.DeepCopy(), strip); !deniedByPolicy(err) {
		t.Errorf("the operator removing its label from its own Service: %v, want the policy's refusal", err)
	}
	if err := admin.Patch(t.Context(), sts.DeepCopy(), adopt, client.DryRunAll); err != nil {
		t.Errorf("the policy binds users other than the operator: %v", err)
	}
}

// ownMeta is the metadata of an object the operator labelled as its own.
func ownMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": render.OperatorName}}
}

// tokenSecret is a Secret, labelled as the operator's, that the token
// controller would fill with a token of the ServiceAccount it names.
func tokenSecret(namespace, serviceAccount string) *corev1.Secret {
	meta := ownMeta(namespace, "planted-token")
	meta.Annotations = map[string]string{corev1.ServiceAccountNameKey: serviceAccount}
	return &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeServiceAccountToken}
}

func unlabelled(svc *corev1.Service, name string) *corev1.Service {
	// Only the ports: the tenant's Service holds an allocated cluster IP.
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: name}, Spec: corev1.ServiceSpec{Ports: svc.Spec.Ports}}
}

// TestChartNamespaceScopedInstall installs the chart for one namespace:
// the ServiceAccount gets its permissions there only (a RoleBinding, no
// ClusterRoleBinding), the operator started as in the chart
// (--watch-namespaces) serves a Notebook there, and it neither may nor
// tries to work anywhere else.
func TestChartNamespaceScopedInstall(t *testing.T) {
	const release, ns = "nb-scoped", "mlp-nb-scoped"
	c := env.AdminClient(t, scheme)
	team := testenv.CreateNamespace(t, c, "team")
	other := testenv.CreateNamespace(t, c, "other")
	values := map[string]any{"crds": map[string]any{"enabled": false}, "rbac": map[string]any{"namespaces": []any{team}}}
	if _, err := charttest.Install(env.Config, chartDir(), release, ns, values, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = charttest.Uninstall(env.Config, release, ns, t.Logf) })
	saConfig := charttest.ImpersonateServiceAccount(env.Config, ns, release+"-notebook-operator")
	sa := testenv.NewClient(t, saConfig, scheme)

	for name, tc := range map[string]struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		"create Secrets in its namespace":        {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "create", Namespace: team}, true},
		"patch StatefulSets in its namespace":    {authorizationv1.ResourceAttributes{Group: "apps", Resource: "statefulsets", Verb: "patch", Namespace: team}, true},
		"create Secrets elsewhere":               {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "create", Namespace: other}, false},
		"read Secrets in kube-system":            {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "kube-system"}, false},
		"watch Secrets cluster-wide":             {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch"}, false},
		"patch StatefulSets elsewhere":           {authorizationv1.ResourceAttributes{Group: "apps", Resource: "statefulsets", Verb: "patch", Namespace: other}, false},
		"list Notebooks cluster-wide":            {authorizationv1.ResourceAttributes{Group: "notebooks.mlplatform.dev", Resource: "notebooks", Verb: "list"}, false},
		"patch Notebook status in its namespace": {authorizationv1.ResourceAttributes{Group: "notebooks.mlplatform.dev", Resource: "notebooks", Subresource: "status", Verb: "patch", Namespace: team}, true},
	} {
		t.Run(name, func(t *testing.T) {
			testenv.Eventually(t, "RBAC answers as the chart grants", func(ctx context.Context) (bool, error) {
				review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &tc.attrs}}
				if err := sa.Create(ctx, review); err != nil {
					return false, err
				}
				return review.Status.Allowed == tc.want, nil
			})
		})
	}

	waitPolicyInForce(t, sa, team)
	op := startOperator(t, operatorOptions{restConfig: saConfig, namespaces: []string{team}})
	runningNotebook(t, c, op, newNotebook(team, "scoped"), t0)
	// The operator's caches do not cover other namespaces at all, so a
	// Notebook there never reaches a reconcile.
	if err := op.reconciler.Client.List(t.Context(), &notebooksv1alpha1.NotebookList{}, client.InNamespace(other)); err == nil {
		t.Error("the namespace-scoped operator's cache lists Notebooks of another namespace")
	}
}
