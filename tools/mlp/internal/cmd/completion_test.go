package cmd

import (
	"context"
	"strings"
	"testing"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// TestCompletion completes flag values as kubectl does: namespaces from
// the cluster, contexts from the kubeconfig, the fixed values of
// --framework and --backend, FeatureStore names; and the completion
// script names the command.
func TestCompletion(t *testing.T) {
	ns := clitest.NewNamespace(t)
	fs := &featuresv1alpha1.FeatureStore{}
	fs.Namespace, fs.Name, fs.Spec.Project = ns, "clicks", "clicks"
	fs.Spec.OnlineStore.Managed = &featuresv1alpha1.ManagedServer{}
	fs.Spec.OfflineStore.Managed = &featuresv1alpha1.ManagedServer{}
	fs.Spec.Registry.Managed = &featuresv1alpha1.ManagedServer{}
	clitest.CreateAll(t, fs)
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"namespace":     {args: []string{"train", "list", "-n", ns[:len(ns)-2]}, want: []string{ns}},
		"context":       {args: []string{"train", "list", "--context", ""}, want: []string{"test"}},
		"framework":     {args: []string{"train", "submit", "--framework", "x"}, want: []string{"xgboost"}},
		"backend":       {args: []string{"train", "submit", "--backend", ""}, want: []string{"kubeflow", "native"}},
		"feature store": {args: []string{"notebook", "create", "nb", "--feature-store", "cl"}, want: []string{"clicks"}},
		"output":        {args: []string{"train", "list", "-o", "js"}, want: []string{"json", "jsonpath-as-json=", "jsonpath-file=", "jsonpath="}},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, append([]string{"__complete"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(r.Out), "\n")
			got := lines[:len(lines)-1] // The last line is cobra's directive.
			if r.Code != 0 || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("exit %d, completions %q, want %q (stderr %q)", r.Code, got, tc.want, r.Err)
			}
		})
	}
	r := clitest.CLI(context.Background(), t, clitest.Env.Config, ns, nil, "completion", "bash")
	if r.Code != 0 || !strings.Contains(r.Out, "__start_mlp") {
		t.Errorf("completion bash: exit %d, no script:\n%.200s", r.Code, r.Out)
	}
}
