package charttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/release"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// KubeVersion is what client-only renders claim to target, matching the
// test control plane.
var KubeVersion = chartutil.KubeVersion{Version: testenv.KubernetesVersion, Major: "1", Minor: "34"}

// Lint runs `helm lint --strict` on the chart with the given values and
// returns every message at warning level or above as an error.
func Lint(chartDir string, values map[string]any) error {
	l := action.NewLint()
	l.Strict = true
	l.KubeVersion = &KubeVersion
	res := l.Run([]string{chartDir}, values)
	var errs []error
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			errs = append(errs, errors.New(m.Error()))
		}
	}
	errs = append(errs, res.Errors...)
	return errors.Join(errs...)
}

// Render renders the chart client-side, as `helm template` does, and
// returns the manifests. Schema validation of values happens here too.
func Render(chartDir, releaseName, namespace string, values map[string]any) (string, error) {
	rel, err := dryRun(chartDir, releaseName, namespace, values)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// Notes renders the chart client-side and returns what `helm install`
// would print after installing it (the top chart's NOTES.txt).
func Notes(chartDir, releaseName, namespace string, values map[string]any) (string, error) {
	rel, err := dryRun(chartDir, releaseName, namespace, values)
	if err != nil {
		return "", err
	}
	return rel.Info.Notes, nil
}

func dryRun(chartDir, releaseName, namespace string, values map[string]any) (*release.Release, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.IncludeCRDs = true
	install.KubeVersion = &KubeVersion
	return install.Run(chrt, values)
}

// Install installs the chart into the cluster behind cfg, creating the
// namespace, and returns the release. It does not wait for pods: the test
// API server runs no kubelet.
func Install(cfg *rest.Config, chartDir, releaseName, namespace string, values map[string]any, logf func(string, ...any)) (*release.Release, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	actionCfg, cleanup, err := actionConfig(cfg, namespace, logf)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	install := action.NewInstall(actionCfg)
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.CreateNamespace = true
	return install.Run(chrt, values)
}

// Uninstall removes a release installed with Install.
func Uninstall(cfg *rest.Config, releaseName, namespace string, logf func(string, ...any)) error {
	actionCfg, cleanup, err := actionConfig(cfg, namespace, logf)
	if err != nil {
		return err
	}
	defer cleanup()
	_, err = action.NewUninstall(actionCfg).Run(releaseName)
	return err
}

func actionConfig(cfg *rest.Config, namespace string, logf func(string, ...any)) (*action.Configuration, func(), error) {
	dir, err := os.MkdirTemp("", "charttest-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, kubeconfig); err != nil {
		cleanup()
		return nil, nil, err
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &namespace
	actionCfg := &action.Configuration{}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := actionCfg.Init(flags, namespace, "secret", logf); err != nil {
		cleanup()
		return nil, nil, err
	}
	return actionCfg, cleanup, nil
}

// ImpersonateServiceAccount returns a copy of an administrator's cfg that
// acts as the ServiceAccount, with the groups the API server gives every
// ServiceAccount, so tests exercise exactly the RBAC a chart grants.
func ImpersonateServiceAccount(cfg *rest.Config, namespace, name string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return out
}

// Documents splits rendered manifests into their YAML documents, dropping
// empty ones.
func Documents(manifest string) []string {
	var out []string
	for _, doc := range strings.Split(manifest, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "\n")) != "" {
			out = append(out, doc)
		}
	}
	return out
}

// Objects decodes every rendered document of the given kind (its "kind:"
// line) into a T, e.g. Objects[networkingv1.NetworkPolicy](manifest,
// "NetworkPolicy").
func Objects[T any](manifest, kind string) ([]T, error) {
	var out []T
	for _, doc := range Documents(manifest) {
		if !strings.Contains(doc, "\nkind: "+kind+"\n") {
			continue
		}
		var obj T
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// IngressPeers maps each port of np's ingress rules to the rule's peers as
// JSON, "[]" for a rule that admits every source: a chart test compares the
// whole policy at a glance.
func IngressPeers(np networkingv1.NetworkPolicy) (map[int32]string, error) {
	out := map[int32]string{}
	for _, rule := range np.Spec.Ingress {
		from := []byte("[]")
		if rule.From != nil {
			var err error
			if from, err = json.Marshal(rule.From); err != nil {
				return nil, err
			}
		}
		for _, p := range rule.Ports {
			out[p.Port.IntVal] = string(from)
		}
	}
	return out, nil
}
