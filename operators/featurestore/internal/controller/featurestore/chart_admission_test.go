package featurestore_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featurestesting "github.com/ml-platform/ml-platform/apis/features/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestorebackend"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// deniedByOwnedObjectsPolicy reports whether err is the chart's
// owned-objects policy refusing a request, rather than RBAC or validation.
func deniedByOwnedObjectsPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "owned-objects.features.mlplatform.dev")
}

// TestChartPolicyConfinesTheServiceAccountToItsObjects impersonates the
// chart's ServiceAccount, which RBAC lets create, update and delete every
// Secret, ConfigMap, Service and StatefulSet and delete every claim in the
// cluster: the chart's ValidatingAdmissionPolicy refuses it every write to
// an object without its managed-by label, in kube-system, in a tenant's
// namespace and in its own; and, labelled or not, what would lend it the
// cluster's credentials: a token Secret of a ServiceAccount, anything in
// kube-system, a Service with external IPs, a StatefulSet whose pods run
// as another ServiceAccount or with a token. Its own work is covered by
// TestChartInstallsAndItsServiceAccountRunsTheOperator under the same
// policy.
func TestChartPolicyConfinesTheServiceAccountToItsObjects(t *testing.T) {
	admin := adminClient()
	installChart(t)
	op, err := client.New(charttest.ImpersonateServiceAccount(env.Config, operatorNamespace, "fs-featurestore-operator"), client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.CreateNamespace(t, admin, "tenant")
	sel := map[string]string{"app": "tenant-db"}
	systemSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", GenerateName: "bootstrap-"}, StringData: map[string]string{"k": "v"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-settings"}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-db"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: sel},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}}},
	}}
	for _, o := range []client.Object{systemSecret, cm, pvc, sts} {
		if err := admin.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	// The API server loads a new policy asynchronously.
	testenv.Eventually(t, "the owned-objects policy is in force", func(ctx context.Context) (bool, error) {
		return deniedByOwnedObjectsPolicy(op.Delete(ctx, cm.DeepCopy(), client.DryRunAll)), nil
	})

	adopt := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"featurestore-operator"}}}`))
	for name, write := range map[string]func(ctx context.Context) error{
		"update a kube-system Secret": func(ctx context.Context) error {
			s := systemSecret.DeepCopy()
			s.StringData = map[string]string{"k": "planted"}
			return op.Update(ctx, s)
		},
		"adopt a kube-system Secret by labelling it": func(ctx context.Context) error { return op.Patch(ctx, systemSecret.DeepCopy(), adopt) },
		"delete a kube-system Secret":                func(ctx context.Context) error { return op.Delete(ctx, systemSecret.DeepCopy()) },
		"delete a tenant's ConfigMap":                func(ctx context.Context) error { return op.Delete(ctx, cm.DeepCopy()) },
		"create an unlabelled ConfigMap": func(ctx context.Context) error {
			return op.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"}}, client.DryRunAll)
		},
		"create a labelled token Secret for a kube-system ServiceAccount": func(ctx context.Context) error {
			return op.Create(ctx, tokenSecret("kube-system", "clusterrole-aggregation-controller"), client.DryRunAll)
		},
		"create a labelled token Secret for a tenant's ServiceAccount": func(ctx context.Context) error {
			return op.Create(ctx, tokenSecret(ns, "default"), client.DryRunAll)
		},
		"create a labelled Opaque Secret in kube-system": func(ctx context.Context) error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: labelled("kube-system", "planted")}, client.DryRunAll)
		},
		"create a labelled Service with external IPs": func(ctx context.Context) error {
			return op.Create(ctx, &corev1.Service{ObjectMeta: labelled(ns, "planted"), Spec: corev1.ServiceSpec{
				Ports: []corev1.ServicePort{{Port: 443}}, ExternalIPs: []string{"203.0.113.7"},
			}}, client.DryRunAll)
		},
		"create a labelled StatefulSet running as a tenant's ServiceAccount": func(ctx context.Context) error {
			s := sts.DeepCopy()
			s.ObjectMeta = labelled(ns, "planted")
			s.Spec.Template.Spec.ServiceAccountName = "tenant-deployer"
			return op.Create(ctx, s, client.DryRunAll)
		},
		"create a labelled StatefulSet with a ServiceAccount token": func(ctx context.Context) error {
			s := sts.DeepCopy()
			s.ObjectMeta = labelled(ns, "planted")
			return op.Create(ctx, s, client.DryRunAll)
		},
		"delete a tenant's claim":       func(ctx context.Context) error { return op.Delete(ctx, pvc.DeepCopy()) },
		"delete a tenant's StatefulSet": func(ctx context.Context) error { return op.Delete(ctx, sts.DeepCopy()) },
		"scale a tenant's StatefulSet": func(ctx context.Context) error {
			return op.Patch(ctx, sts.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`)))
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := write(t.Context()); !deniedByOwnedObjectsPolicy(err) {
				t.Errorf("got %v, want the owned-objects policy's refusal", err)
			}
		})
	}
	for _, o := range []client.Object{systemSecret, cm, pvc, sts} {
		if err := admin.Get(t.Context(), client.ObjectKeyFromObject(o), o); err != nil || !o.GetDeletionTimestamp().IsZero() {
			t.Errorf("%s %s after the refused writes: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	if err := admin.Delete(t.Context(), systemSecret); err != nil {
		t.Errorf("the policy binds users other than the operator: %v", err)
	}
	// What the operator makes is admitted: an Opaque Secret and a
	// StatefulSet whose pods run as the namespace's default account
	// without its token.
	own := sts.DeepCopy()
	own.ObjectMeta = labelled(ns, "own")
	own.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(false)
	for _, o := range []client.Object{&corev1.Secret{ObjectMeta: labelled(ns, "own"), Type: corev1.SecretTypeOpaque}, own} {
		if err := op.Create(t.Context(), o, client.DryRunAll); err != nil {
			t.Errorf("the operator creating its own %T: %v", o, err)
		}
	}
}

// labelled is the metadata of an object the operator labelled as its own.
func labelled(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "featurestore-operator"}}
}

// tokenSecret is a Secret, labelled as the operator's, that the token
// controller would fill with a token of the ServiceAccount it names.
func tokenSecret(namespace, serviceAccount string) *corev1.Secret {
	meta := labelled(namespace, "planted-token")
	meta.Annotations = map[string]string{corev1.ServiceAccountNameKey: serviceAccount}
	return &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeServiceAccountToken}
}

// TestChartNamespaceScopedInstall installs the chart for one tenant
// namespace: the ServiceAccount may work on namespaced kinds there and in
// the release namespace (admin Secrets, handed-off cleanups) only, keeps
// cluster-wide access to the cluster-scoped kinds alone, and the operator
// is told to watch exactly those namespaces.
func TestChartNamespaceScopedInstall(t *testing.T) {
	const release, ns = "fs-scoped", "mlp-fs-scoped"
	admin := adminClient()
	team := testenv.CreateNamespace(t, admin, "team")
	other := testenv.CreateNamespace(t, admin, "other")
	values := map[string]any{
		"crds":           map[string]any{"enabled": false},
		"abandonCleanup": map[string]any{"policy": false}, // the package's other release has it
		"rbac":           map[string]any{"namespaces": []any{team}},
	}
	manifest, err := charttest.Render(chartDir, release, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(manifest, "- --watch-namespaces="+team+","+ns+"\n") {
		t.Error("the operator is not told to watch the tenant's and its own namespace")
	}
	if _, err := charttest.Install(env.Config, chartDir, release, ns, values, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = charttest.Uninstall(env.Config, release, ns, t.Logf) })
	sa, err := client.New(charttest.ImpersonateServiceAccount(env.Config, ns, release+"-featurestore-operator"), client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		"create Secrets in its tenant's namespace": {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "create", Namespace: team}, true},
		"read admin Secrets in its own namespace":  {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: ns}, true},
		"watch FeatureStoreBackends":               {authorizationv1.ResourceAttributes{Group: "features.mlplatform.dev", Resource: "featurestorebackends", Verb: "watch"}, true},
		"watch Namespaces":                         {authorizationv1.ResourceAttributes{Resource: "namespaces", Verb: "watch"}, true},
		"update Secrets elsewhere":                 {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "update", Namespace: other}, false},
		"update Secrets in kube-system":            {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "update", Namespace: "kube-system"}, false},
		"read Secrets cluster-wide":                {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list"}, false},
		"delete claims elsewhere":                  {authorizationv1.ResourceAttributes{Resource: "persistentvolumeclaims", Verb: "delete", Namespace: other}, false},
		"delete StatefulSets elsewhere":            {authorizationv1.ResourceAttributes{Group: "apps", Resource: "statefulsets", Verb: "delete", Namespace: other}, false},
		"write ConfigMaps in kube-system":          {authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "create", Namespace: "kube-system"}, false},
		"record events of backends (in default)":   {authorizationv1.ResourceAttributes{Resource: "events", Verb: "create", Namespace: "default"}, true},
		"write Secrets in default":                 {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "create", Namespace: "default"}, false},
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

	// The operator runs as the chart runs it: as the ServiceAccount,
	// watching the tenant's namespace and its own, where the backends'
	// admin Secrets are copied. A store is provisioned, published and
	// cleaned up.
	for _, name := range []string{"pg-admin", "redis-admin"} {
		secret := &corev1.Secret{}
		if err := admin.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: name}, secret); err != nil {
			t.Fatal(err)
		}
		copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: secret.Data}
		if err := admin.Create(t.Context(), copied); err != nil {
			t.Fatal(err)
		}
	}
	logsBefore := len(testenv.Logs.String())
	startScopedOperator(t, charttest.ImpersonateServiceAccount(env.Config, ns, release+"-featurestore-operator"), ns, []string{team, ns}, nil)
	fs := waitReady(t, admin, createStore(t, admin, newStore(team, "scoped", "scopedproject").obj()))
	testenv.WaitForEvent(t, admin, fs, "Ready")
	plan := cleanup.PlanFor(fs)
	requireProvisioned(t, plan, true)
	if err := admin.Delete(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, admin, fs)
	requireProvisioned(t, plan, false)

	// A store in a namespace the operator does not watch is never
	// reconciled: no finalizer, no status, while a store created after
	// it in the watched namespace becomes Ready.
	elsewhere := createStore(t, admin, newStore(other, "elsewhere", "elsewhereproject").obj())
	t.Cleanup(func() { _ = admin.Delete(context.Background(), elsewhere) })
	probe := waitReady(t, admin, createStore(t, admin, newStore(team, "probe", "probeproject").obj()))
	deleteAndWait(t, admin, probe)
	got, err := getStore(t.Context(), admin, elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) > 0 || len(got.Status.Conditions) > 0 {
		t.Errorf("the namespace-scoped operator worked on a store outside its namespaces: finalizers %v, status %+v", got.Finalizers, got.Status)
	}
	// Nothing it did was refused: the events of the cluster-scoped
	// backends, which land in the default namespace, included.
	for _, line := range strings.Split(testenv.Logs.String()[logsBefore:], "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the namespace-scoped operator was refused: %.400s", line)
		}
	}
}

// deniedByAbandonPolicy reports whether err is the chart's abandon-cleanup
// policy refusing the removal of a cleanup finalizer.
func deniedByAbandonPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "removing the finalizer")
}

// TestChartPolicyGuardsTheCleanupFinalizers removes the operator's
// finalizers by hand. A tenant with the edit role who deleted a store may
// not drop its cleanup finalizer (the operator would never remove the
// databases, roles and Redis user), nor a backend administrator a
// backend's in-use finalizer; a user allowed the abandon-cleanup verb and
// the operator's ServiceAccount may, and so may anybody remove a finalizer
// of another API group.
func TestChartPolicyGuardsTheCleanupFinalizers(t *testing.T) {
	admin := adminClient()
	installChart(t)
	ns := testenv.CreateNamespace(t, admin, "fs")
	tenant := tenantClient(t, admin, ns, "tenant")
	abandoner := userClient(t, admin, "finalizer-abandoner", &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "abandoner"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fs-featurestore-operator-abandon-cleanup"},
	}, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "abandoner-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
	})
	backendAdmin := userClient(t, admin, "finalizer-backend-admin", &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "finalizer-backend-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fs-featurestore-operator-backend-admin"},
	})
	op, err := client.New(charttest.ImpersonateServiceAccount(env.Config, operatorNamespace, "fs-featurestore-operator"), client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	const foreign = "example.com/keep"
	fs := newStore(ns, "guarded", "guardedproject").obj()
	fs.Finalizers = []string{featurestore.FinalizerName, foreign}
	createStore(t, admin, fs)
	t.Cleanup(func() { _ = admin.Patch(context.Background(), fs.DeepCopy(), dropFinalizers) })
	if err := tenant.Delete(t.Context(), fs.DeepCopy()); err != nil {
		t.Fatalf("the tenant deleting its store: %v", err)
	}
	testenv.Eventually(t, "the policy guards the cleanup finalizer", func(ctx context.Context) (bool, error) {
		return deniedByAbandonPolicy(tenant.Patch(ctx, fs.DeepCopy(), dropFinalizers, client.DryRunAll)), nil
	})
	err = tenant.Patch(t.Context(), fs.DeepCopy(), dropFinalizers)
	if !deniedByAbandonPolicy(err) || !strings.Contains(err.Error(), featurestore.FinalizerName) ||
		!strings.Contains(err.Error(), "needs the verb abandon-cleanup on featurestores.features.mlplatform.dev") {
		t.Fatalf("the tenant removing %s: %v, want Forbidden naming the finalizer and the verb", featurestore.FinalizerName, err)
	}
	keepOurs := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+featurestore.FinalizerName+`"]}}`))
	if err := tenant.Patch(t.Context(), fs.DeepCopy(), keepOurs, client.DryRunAll); err != nil {
		t.Errorf("the tenant removing the finalizer of another group: %v", err)
	}
	if err := abandoner.Patch(t.Context(), fs.DeepCopy(), dropFinalizers, client.DryRunAll); err != nil {
		t.Errorf("a user allowed abandon-cleanup removing the finalizer: %v", err)
	}
	if err := op.Patch(t.Context(), fs.DeepCopy(), dropFinalizers); err != nil {
		t.Fatalf("the operator's ServiceAccount removing the finalizer: %v", err)
	}
	testenv.WaitGone(t, admin, fs)

	backend := featurestesting.MakeBackend("guarded-backend").Redis("redis.example.com", 6379, "redis-admin").Obj()
	backend.Finalizers = []string{featurestorebackend.FinalizerName}
	if err := admin.Create(t.Context(), backend); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Patch(context.Background(), backend.DeepCopy(), dropFinalizers) })
	if err := backendAdmin.Delete(t.Context(), backend.DeepCopy()); err != nil {
		t.Fatalf("the backend administrator deleting the backend: %v", err)
	}
	if err := backendAdmin.Patch(t.Context(), backend.DeepCopy(), dropFinalizers); !deniedByAbandonPolicy(err) ||
		!strings.Contains(err.Error(), featurestorebackend.FinalizerName) {
		t.Errorf("the backend administrator removing %s: %v, want Forbidden naming the finalizer", featurestorebackend.FinalizerName, err)
	}
	if err := op.Patch(t.Context(), backend.DeepCopy(), dropFinalizers); err != nil {
		t.Fatalf("the operator's ServiceAccount removing the in-use finalizer: %v", err)
	}
	testenv.WaitGone(t, admin, backend)
}

// dropFinalizers removes every finalizer, as `kubectl patch --type=merge
// -p '{"metadata":{"finalizers":null}}'` does.
var dropFinalizers = client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))

// userClient acts as the user name, bound by the given bindings (their
// subjects are filled in).
func userClient(t *testing.T, admin client.Client, name string, bindings ...client.Object) client.Client {
	t.Helper()
	cfg, err := env.AddUser(name)
	if err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	for _, b := range bindings {
		switch b := b.(type) {
		case *rbacv1.RoleBinding:
			b.Subjects = subjects
		case *rbacv1.ClusterRoleBinding:
			b.Subjects = subjects
		}
		if err := admin.Create(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
