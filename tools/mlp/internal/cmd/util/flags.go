package util

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// Checks of numeric, duration and quantity flags. Each refuses a careless
// value with the flag's name before anything reaches the cluster, instead
// of dropping it (a negative count), replacing it with a default (zero
// workers) or waiting forever (a negative timeout).

// AtLeast refuses a count below minimum.
func AtLeast(flag string, v, minimum int64) error {
	if v < minimum {
		return fmt.Errorf("--%s must be %d or more, not %d", flag, minimum, v)
	}
	return nil
}

// TimeoutFlag refuses a negative wait.
func TimeoutFlag(flag string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--%s must not be negative, not %s (0 waits without a limit)", flag, d)
	}
	return nil
}

// PositiveQuantity parses a quantity flag that must be more than zero; an
// empty value is nil (not set).
func PositiveQuantity(flag, value string) (*resource.Quantity, error) {
	if value == "" {
		return nil, nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return nil, fmt.Errorf("--%s %q is not a quantity (e.g. 2, 500m, 8Gi): %w", flag, value, err)
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("--%s must be more than 0, not %s", flag, value)
	}
	return &q, nil
}

// EnvVars parses --env NAME=VALUE flags.
func EnvVars(values []string) ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: expected NAME=VALUE", kv)
		}
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out, nil
}

// ResourceFlags are the compute flags of the commands that create pods.
type ResourceFlags struct {
	cpu, memory  string
	accelerators int32
	accelType    string
}

// AddFlags adds --gpus, --accelerator-type, --cpu and --memory; per says
// what they count in.
func (r *ResourceFlags) AddFlags(f *pflag.FlagSet, per string) {
	f.Int32Var(&r.accelerators, "gpus", 0, "Accelerators"+per)
	f.StringVar(&r.accelType, "accelerator-type", "", "Accelerator type the platform team configured (e.g. a100); empty for the default")
	f.StringVar(&r.cpu, "cpu", "", "CPU request"+per+", e.g. 2")
	f.StringVar(&r.memory, "memory", "", "Memory request and limit"+per+", e.g. 8Gi")
}

// Validate refuses quantities that are not more than zero.
func (r *ResourceFlags) Validate() error {
	_, err := r.Resources()
	return errors.Join(AtLeast("gpus", int64(r.accelerators), 0), err)
}

// Resources is what the flags ask for, nil when none was given.
func (r *ResourceFlags) Resources() (*commonv1alpha1.Resources, error) {
	cpu, cerr := PositiveQuantity("cpu", r.cpu)
	memory, merr := PositiveQuantity("memory", r.memory)
	if err := errors.Join(cerr, merr); err != nil {
		return nil, err
	}
	if cpu == nil && memory == nil && r.accelerators <= 0 && r.accelType == "" {
		return nil, nil
	}
	out := &commonv1alpha1.Resources{}
	if cpu != nil || memory != nil {
		out.Requests = corev1.ResourceList{}
	}
	if cpu != nil {
		out.Requests[corev1.ResourceCPU] = *cpu
	}
	if memory != nil {
		out.Requests[corev1.ResourceMemory] = *memory
		out.Limits = corev1.ResourceList{corev1.ResourceMemory: *memory}
	}
	if r.accelerators > 0 || r.accelType != "" {
		out.Accelerators = &commonv1alpha1.Accelerators{Count: r.accelerators, Type: r.accelType}
	}
	return out, nil
}
