package cli

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

func atLeast(flag string, v, minimum int64) error {
	if v < minimum {
		return fmt.Errorf("--%s must be %d or more, not %d", flag, minimum, v)
	}
	return nil
}

func timeoutFlag(flag string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--%s must not be negative, not %s (0 waits without a limit)", flag, d)
	}
	return nil
}

// positiveQuantity parses a quantity flag that must be more than zero; an
// empty value is nil (not set).
func positiveQuantity(flag, value string) (*resource.Quantity, error) {
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

// envVars parses --env NAME=VALUE flags.
func envVars(values []string) ([]corev1.EnvVar, error) {
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

// resourceFlags are the compute flags of the commands that create pods.
type resourceFlags struct {
	cpu, memory  string
	accelerators int32
	accelType    string
}

func (r *resourceFlags) addFlags(f *pflag.FlagSet, per string) {
	f.Int32Var(&r.accelerators, "gpus", 0, "Accelerators"+per)
	f.StringVar(&r.accelType, "accelerator-type", "", "Accelerator type the platform team configured (e.g. a100); empty for the default")
	f.StringVar(&r.cpu, "cpu", "", "CPU request"+per+", e.g. 2")
	f.StringVar(&r.memory, "memory", "", "Memory request and limit"+per+", e.g. 8Gi")
}

func (r *resourceFlags) validate() error {
	_, err := r.resources()
	return errors.Join(atLeast("gpus", int64(r.accelerators), 0), err)
}

// resources is what the flags ask for, nil when none was given.
func (r *resourceFlags) resources() (*commonv1alpha1.Resources, error) {
	cpu, cerr := positiveQuantity("cpu", r.cpu)
	memory, merr := positiveQuantity("memory", r.memory)
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
