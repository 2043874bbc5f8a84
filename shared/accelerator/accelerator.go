package accelerator

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// Class is one accelerator type as the cluster provides it.
type Class struct {
	// Type is the name users write in spec, e.g. "a100".
	Type string `json:"type"`
	// ResourceName is the extended resource the device plugin advertises,
	// e.g. "nvidia.com/gpu".
	ResourceName corev1.ResourceName `json:"resourceName"`
	// NodeSelector picks nodes with this type, e.g.
	// {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let pods onto nodes tainted for accelerator work.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// Catalog is the admin configuration: the chart renders it into a
// ConfigMap that the operator reads at start.
type Catalog struct {
	// DefaultType is used when a request names no type.
	DefaultType string  `json:"defaultType"`
	Classes     []Class `json:"classes"`
}

// Default is the catalog used when the platform team configured none: one
// type, "gpu", for NVIDIA's device plugin.
func Default() Catalog {
	return Catalog{DefaultType: "gpu", Classes: []Class{{Type: "gpu", ResourceName: "nvidia.com/gpu"}}}
}

// Load reads a catalog from a YAML file; an empty path means Default.
func Load(path string) (Catalog, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Catalog{}, err
	}
	var c Catalog
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Catalog{}, fmt.Errorf("accelerator catalog %s: %w", path, err)
	}
	return c, c.Validate()
}

// Validate reports a catalog that could never resolve a request.
func (c Catalog) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, cl := range c.Classes {
		if cl.Type == "" || cl.ResourceName == "" {
			errs = append(errs, fmt.Errorf("accelerator class %q needs a type and a resourceName", cl.Type))
		}
		if seen[cl.Type] {
			errs = append(errs, fmt.Errorf("accelerator type %q is listed twice", cl.Type))
		}
		seen[cl.Type] = true
	}
	if c.DefaultType != "" && !seen[c.DefaultType] {
		errs = append(errs, fmt.Errorf("default accelerator type %q is not among the classes", c.DefaultType))
	}
	return errors.Join(errs...)
}

// Types lists the configured types, for error messages.
func (c Catalog) Types() []string {
	out := make([]string, 0, len(c.Classes))
	for _, cl := range c.Classes {
		out = append(out, cl.Type)
	}
	slices.Sort(out)
	return out
}

// Resolve returns the class for a request, or nil when it asks for none. An
// unknown type is an error worth showing the user verbatim.
func (c Catalog) Resolve(acc *commonv1alpha1.Accelerators) (*Class, error) {
	if acc == nil || acc.Count == 0 {
		return nil, nil
	}
	t := acc.Type
	if t == "" {
		t = c.DefaultType
	}
	if t == "" {
		return nil, fmt.Errorf("accelerators.type is required: this cluster has no default type (configured types: %s)", strings.Join(c.Types(), ", "))
	}
	for i := range c.Classes {
		if c.Classes[i].Type == t {
			return &c.Classes[i], nil
		}
	}
	return nil, fmt.Errorf("accelerator type %q is not offered by this cluster (configured types: %s)", t, strings.Join(c.Types(), ", "))
}

// Apply requests count devices of class for container (as limits and
// requests, which must be equal for extended resources) and steers the pod
// to matching nodes. Node selector keys the user already set are kept: the
// user may narrow the choice, e.g. to one zone.
func Apply(class *Class, count int32, pod *corev1.PodSpec, container *corev1.Container) {
	if class == nil || count == 0 {
		return
	}
	q := *resource.NewQuantity(int64(count), resource.DecimalSI)
	if container.Resources.Limits == nil {
		container.Resources.Limits = corev1.ResourceList{}
	}
	if container.Resources.Requests == nil {
		container.Resources.Requests = corev1.ResourceList{}
	}
	container.Resources.Limits[class.ResourceName] = q
	container.Resources.Requests[class.ResourceName] = q
	if len(class.NodeSelector) > 0 && pod.NodeSelector == nil {
		pod.NodeSelector = map[string]string{}
	}
	for k, v := range class.NodeSelector {
		if _, set := pod.NodeSelector[k]; !set {
			pod.NodeSelector[k] = v
		}
	}
	for _, t := range class.Tolerations {
		if !slices.ContainsFunc(pod.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
			pod.Tolerations = append(pod.Tolerations, t)
		}
	}
}
