package version

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// TestVersionPrintsClientAPIsAndOperators shows the client's version, which
// APIs the cluster serves and the operator Deployments a user may see; a
// user who may not list Deployments gets the rest and a sentence.
func TestVersionPrintsClientAPIsAndOperators(t *testing.T) {
	ns := clitest.NewNamespace(t)
	labels := map[string]string{labelPartOf: "ml-platform", labelName: "trainingjob-operator", labelVersion: "0.1.0"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mlp-trainingjob-operator", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "trainingjob-operator:0.1.0"}}},
			},
		},
	}
	if err := clitest.AdminClient(t).Create(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	r := clitest.Run(t, ns, "version")
	for _, want := range []string{
		"Client: mlp v0.0.0-test\n",
		"API training.mlplatform.dev/v1alpha1 (TrainingJob operator): served\n",
		"API notebooks.mlplatform.dev/v1alpha1 (Notebook operator): served\n",
		"trainingjob-operator  " + ns + "  0.1.0    0/1    trainingjob-operator:0.1.0\n",
	} {
		if r.Code != 0 || !strings.Contains(r.Out, want) {
			t.Errorf("exit %d, output lacks %q:\n%s%s", r.Code, want, r.Out, r.Err)
		}
	}
	cfg, err := clitest.Env.AddUser("erin", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	r = clitest.CLI(context.Background(), t, cfg, ns, nil, "version")
	if r.Code != 0 || !strings.Contains(r.Out, "API features.mlplatform.dev/v1alpha1 (FeatureStore operator): served") ||
		!strings.Contains(r.Out, `Operators: not visible to you (permission denied: you may not list deployments`) {
		t.Errorf("as a tenant: exit %d, out:\n%s%s", r.Code, r.Out, r.Err)
	}
}

// TestVersionEscapesTheImage: an operator Deployment's image, which the
// API server takes with control characters inside, is printed escaped.
func TestVersionEscapesTheImage(t *testing.T) {
	ns := clitest.NewNamespace(t)
	labels := map[string]string{labelPartOf: "ml-platform", labelName: "hostile-operator"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostile-operator", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "x" + clitest.Hostile + "x"}}},
			},
		},
	}
	c := clitest.AdminClient(t)
	if err := c.Create(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	// Other tests of the package list every operator Deployment.
	t.Cleanup(func() { _ = c.Delete(context.Background(), dep) })
	r := clitest.Run(t, ns, "version")
	if r.Code != 0 || !strings.Contains(r.Out, "x"+clitest.HostileLine+"x\n") || len(clitest.TerminalControls(r.Out)) > 0 {
		t.Errorf("exit %d, want the image escaped:\n%q", r.Code, r.Out)
	}
}
