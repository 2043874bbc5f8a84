package docs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// chartDependency is one entry of the umbrella's Chart.yaml dependencies.
type chartDependency struct {
	Name      string `json:"name"`
	Condition string `json:"condition"`
}

// ignoredCreates are resources an operator creates for its own running
// (events, reviews, leader election), not for the objects it reconciles.
var ignoredCreates = []string{"events", "tokenreviews", "subjectaccessreviews", "leases"}

// architecture renders docs/architecture.md's Mermaid picture from the
// charts under chartsDir: the umbrella's subcharts, the CRDs each operator
// chart installs (files/crds) and the kinds its generated ClusterRole
// (files/rbac/role.yaml) lets it create.
func architecture(chartsDir string) (string, error) {
	var umbrella struct {
		Dependencies []chartDependency `json:"dependencies"`
	}
	if err := readYAML(filepath.Join(chartsDir, "ml-platform", "Chart.yaml"), &umbrella); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart LR\n")
	b.WriteString("  cli([\"mlp CLI / kubectl mlp\"])\n")
	b.WriteString("  subgraph umbrella [\"Helm chart ml-platform\"]\n")
	for _, d := range umbrella.Dependencies {
		fmt.Fprintf(&b, "    %s[\"%s<br/>%s\"]\n", nodeID("chart", d.Name), d.Name, d.Condition)
	}
	b.WriteString("  end\n")
	for _, d := range umbrella.Dependencies {
		crds, err := chartCRDs(filepath.Join(chartsDir, d.Name, "files", "crds"))
		if err != nil {
			return "", err
		}
		if len(crds) == 0 {
			continue
		}
		chart := nodeID("chart", d.Name)
		for _, crd := range crds {
			id := nodeID("crd", crd.Spec.Names.Plural+"."+crd.Spec.Group)
			fmt.Fprintf(&b, "  %s{{\"%s<br/>%s<br/>%s\"}}\n", id, crd.Spec.Names.Kind, crd.Spec.Group, strings.Join(crd.Spec.Names.ShortNames, ", "))
			fmt.Fprintf(&b, "  %s -->|reconciles| %s\n", chart, id)
			// mlp works with the namespaced kinds tenants use; the
			// cluster-scoped ones (FeatureStoreBackend) are the platform
			// team's, through kubectl.
			if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
				fmt.Fprintf(&b, "  cli -.-> %s\n", id)
			}
		}
		creates, err := createdResources(filepath.Join(chartsDir, d.Name, "files", "rbac", "role.yaml"))
		if err != nil {
			return "", err
		}
		if len(creates) > 0 {
			id := nodeID("children", d.Name)
			fmt.Fprintf(&b, "  %s[/\"creates: %s\"/]\n", id, strings.Join(creates, ", "))
			fmt.Fprintf(&b, "  %s --> %s\n", chart, id)
		}
	}
	b.WriteString("```\n")
	return b.String(), nil
}

// chartCRDs reads every CRD in dir, sorted by file name; none when dir does
// not exist (a chart that installs no CRDs of ours).
func chartCRDs(dir string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := readYAML(f, &crd); err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

// createdResources lists "group/resource" (core resources bare) that the
// ClusterRole in path may create, sorted; none when path does not exist.
func createdResources(path string) ([]string, error) {
	var role rbacv1.ClusterRole
	if err := readYAML(path, &role); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, r := range role.Rules {
		if !slices.Contains(r.Verbs, "create") {
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if slices.Contains(ignoredCreates, res) || strings.Contains(res, "/") {
					continue
				}
				if g != "" {
					res = g + "/" + res
				}
				out = append(out, res)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// Generated files start with a document separator; the first document
	// is the one.
	doc := strings.TrimPrefix(strings.TrimSpace(string(b)), "---\n")
	if i := strings.Index(doc, "\n---"); i >= 0 {
		doc = doc[:i]
	}
	if err := yaml.Unmarshal([]byte(doc), into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// nodeID makes a Mermaid node id out of a name.
func nodeID(prefix, name string) string {
	return prefix + "_" + strings.NewReplacer("-", "_", ".", "_").Replace(name)
}
