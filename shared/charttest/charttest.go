package charttest

import (
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
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

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
