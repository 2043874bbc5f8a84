package chartinstall

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, &env)
}

const (
	release   = "tj"
	namespace = "mlp-system"
	// kubeflowName is the chart's name for the training-operator's
	// objects: <release>-trainingjob-operator-kubeflow.
	kubeflowName = "tj-trainingjob-operator-kubeflow"
)

func TestChartInstallsTheKubeflowTrainingOperator(t *testing.T) {
	chart := filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator")
	values := map[string]any{"kubeflow": map[string]any{"enabled": true, "image": map[string]any{"repository": "registry.example.com/training-operator", "tag": "v1.8.1-local"}}}
	if _, err := charttest.Install(env.Config, chart, release, namespace, values, t.Logf); err != nil {
		t.Fatal(err)
	}

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	// The five Kubeflow CRDs the platform runs, established and kept on
	// uninstall, next to the TrainingJob CRD.
	for _, name := range []string{"pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org", "xgboostjobs.kubeflow.org", "paddlejobs.kubeflow.org", "mpijobs.kubeflow.org", "trainingjobs.training.mlplatform.dev"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		testenv.Eventually(t, name+" established", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if crd.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not kept on uninstall: %v", name, crd.Annotations)
		}
	}
	for _, name := range []string{"mxjobs.kubeflow.org"} {
		if err := c.Get(t.Context(), client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err == nil {
			t.Errorf("CRD %s is installed; the platform runs only five frameworks", name)
		}
	}

	get := func(obj client.Object, ns, name string) {
		t.Helper()
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			t.Errorf("%T %s: %v", obj, name, err)
		}
	}
	deploy := &appsv1.Deployment{}
	get(deploy, namespace, kubeflowName)
	if cs := deploy.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Image != "registry.example.com/training-operator:v1.8.1-local" ||
		!slices.Contains(cs[0].Args, "--enable-scheme=pytorchjob") || !slices.Contains(cs[0].Args, "--webhook-secret-name="+kubeflowName+"-webhook-cert") {
		t.Errorf("training-operator Deployment containers %+v", deploy.Spec.Template.Spec.Containers)
	}
	if deploy.Spec.Template.Spec.ServiceAccountName != kubeflowName {
		t.Errorf("training-operator runs as %q", deploy.Spec.Template.Spec.ServiceAccountName)
	}
	get(&corev1.ServiceAccount{}, namespace, kubeflowName)
	get(&corev1.Service{}, namespace, kubeflowName)
	get(&corev1.Secret{}, namespace, kubeflowName+"-webhook-cert")
	get(&rbacv1.Role{}, namespace, kubeflowName+"-certs")
	get(&rbacv1.RoleBinding{}, namespace, kubeflowName+"-certs")
	binding := &rbacv1.ClusterRoleBinding{}
	get(binding, "", kubeflowName)
	if binding.RoleRef.Name != kubeflowName || len(binding.Subjects) != 1 || binding.Subjects[0].Name != kubeflowName {
		t.Errorf("ClusterRoleBinding %+v", binding)
	}
	role := &rbacv1.ClusterRole{}
	get(role, "", kubeflowName)
	if !grants(role, "kubeflow.org", "pytorchjobs", "update") || !grants(role, "", "pods", "create") {
		t.Errorf("training-operator ClusterRole lacks what it needs: %+v", role.Rules)
	}

	// Its certificate rotator may update its own webhook configuration and
	// no other: with update on every one, it could turn any validating
	// webhook of the cluster off or point it at itself.
	operator, err := client.New(charttest.ImpersonateServiceAccount(env.Config, namespace, kubeflowName), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Its own first: once that is allowed, RBAC has seen the binding, and a
	// refusal of the other is the binding's answer.
	for _, tc := range []struct {
		webhook string
		want    bool
	}{{"validator.training-operator.kubeflow.org", true}, {"validator.kueue.x-k8s.io", false}} {
		webhook, want := tc.webhook, tc.want
		testenv.Eventually(t, "RBAC answers whether the training-operator may update "+webhook, func(ctx context.Context) (bool, error) {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Verb: "update", Name: webhook,
			}}}
			if err := operator.Create(ctx, review); err != nil {
				return false, err
			}
			return review.Status.Allowed == want, nil
		})
	}

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	get(vwc, "", "validator.training-operator.kubeflow.org")
	var hooks []string
	for _, w := range vwc.Webhooks {
		hooks = append(hooks, w.Name)
		if s := w.ClientConfig.Service; s == nil || s.Name != kubeflowName || s.Namespace != namespace {
			t.Errorf("webhook %s calls %+v, want the chart's Service", w.Name, w.ClientConfig.Service)
		}
	}
	slices.Sort(hooks)
	want := []string{
		"validator.paddlejob.training-operator.kubeflow.org", "validator.pytorchjob.training-operator.kubeflow.org",
		"validator.tfjob.training-operator.kubeflow.org", "validator.xgboostjob.training-operator.kubeflow.org",
	}
	if !slices.Equal(hooks, want) {
		t.Errorf("webhooks %v, want %v", hooks, want)
	}

	// Uninstalling keeps the CRDs (and with them every job).
	if err := charttest.Uninstall(env.Config, release, namespace, t.Logf); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "pytorchjobs.kubeflow.org"}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("the PyTorchJob CRD went with the release: %v", err)
	}
	testenv.Eventually(t, "the training-operator Deployment is gone", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: kubeflowName}, &appsv1.Deployment{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
}

func grants(role *rbacv1.ClusterRole, group, resource, verb string) bool {
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && (slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}
