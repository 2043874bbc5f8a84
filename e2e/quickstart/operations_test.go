package quickstart

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/logging"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// renderOperator renders the umbrella with values for one operator chart
// and returns that operator's Deployment.
func renderOperator(t *testing.T, operator string, values map[string]any) (*appsv1.Deployment, error) {
	t.Helper()
	if values == nil {
		values = map[string]any{}
	}
	manifest, err := charttest.Render(ChartDir, Release, Namespace, map[string]any{operator: values})
	if err != nil {
		return nil, err
	}
	for _, d := range deployments(t, manifest) {
		if d.Name == Release+"-"+operator {
			return &d, nil
		}
	}
	t.Fatalf("no Deployment of %s rendered", operator)
	return nil, nil
}

// managerFlags parses the shared manager's flags out of the operator's
// arguments, as its main would, leaving the operator's own flags out. The
// $(VAR) references in them are expanded first, as the kubelet does.
func managerFlags(t *testing.T, container corev1.Container) manager.Config {
	t.Helper()
	cfg := manager.DefaultConfig()
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	cfg.BindFlags(fs)
	expand := containerEnv(t, container)
	var ours []string
	for _, arg := range container.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if fs.Lookup(name) != nil {
			ours = append(ours, expand.Replace(arg))
		}
	}
	if err := fs.Parse(ours); err != nil {
		t.Fatalf("the operator's main would refuse %q: %v", ours, err)
	}
	return cfg
}

// containerEnv replaces each $(NAME) of the container's environment with
// the value the kubelet would give it: a literal value, or a resource of
// the container itself (its memory limit in bytes).
func containerEnv(t *testing.T, container corev1.Container) *strings.Replacer {
	t.Helper()
	var pairs []string
	for _, e := range container.Env {
		value := e.Value
		if ref := e.ValueFrom; ref != nil {
			switch {
			case ref.ResourceFieldRef != nil && ref.ResourceFieldRef.Resource == "limits.memory":
				value = strconv.FormatInt(container.Resources.Limits.Memory().Value(), 10)
			default:
				continue
			}
		}
		pairs = append(pairs, "$("+e.Name+")", value)
	}
	return strings.NewReplacer(pairs...)
}

func TestLogLevelStaysBelowClientGoDumps(t *testing.T) {
	accepted := []any{"error", "info", "debug", 1, logging.MaxLevel, "2"}
	refused := []any{logging.MaxLevel + 1, 8, 10, "8", "6", "0", "trace", 0, -1}
	for _, operator := range Operators {
		for _, level := range accepted {
			t.Run(fmt.Sprintf("%s accepts %v", operator, level), func(t *testing.T) {
				d, err := renderOperator(t, operator, map[string]any{"logLevel": level})
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf("--zap-log-level=%v", level)
				if args := d.Spec.Template.Spec.Containers[0].Args; !containsString(args, want) {
					t.Errorf("args %q lack %s", args, want)
				}
			})
		}
		for _, level := range refused {
			t.Run(fmt.Sprintf("%s refuses %v", operator, level), func(t *testing.T) {
				if _, err := renderOperator(t, operator, map[string]any{"logLevel": level}); err == nil {
					t.Errorf("logLevel %v rendered; want a schema error", level)
				}
			})
		}
	}
}

// TestLeaderElectionTimingsReachTheOperator checks that the chart's
// defaults are the operator's own, that values set in the chart reach its
// flags, and that the schema refuses what is not a duration.
func TestLeaderElectionTimingsReachTheOperator(t *testing.T) {
	defaults := manager.DefaultConfig()
	for _, operator := range Operators {
		t.Run(operator, func(t *testing.T) {
			d, err := renderOperator(t, operator, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := managerFlags(t, d.Spec.Template.Spec.Containers[0])
			if got.LeaseDuration != defaults.LeaseDuration || got.RenewDeadline != defaults.RenewDeadline || got.RetryPeriod != defaults.RetryPeriod || got.RenewInterval != defaults.RenewInterval {
				t.Errorf("chart defaults lease %v, renew %v, retry %v, renew interval %v; the operator's are %v, %v, %v, %v",
					got.LeaseDuration, got.RenewDeadline, got.RetryPeriod, got.RenewInterval, defaults.LeaseDuration, defaults.RenewDeadline, defaults.RetryPeriod, defaults.RenewInterval)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("the chart's defaults are invalid: %v", err)
			}
			if limit := d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().Value(); limit == 0 || got.MemoryLimit != limit {
				t.Errorf("--memory-limit reaches the operator as %d bytes; the container's limit is %d", got.MemoryLimit, limit)
			}

			d, err = renderOperator(t, operator, map[string]any{"leaderElection": map[string]any{
				"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "5s",
			}})
			if err != nil {
				t.Fatal(err)
			}
			got = managerFlags(t, d.Spec.Template.Spec.Containers[0])
			if diff := cmp.Diff([]string{"30s", "20s", "5s"}, []string{got.LeaseDuration.String(), got.RenewDeadline.String(), got.RetryPeriod.String()}); diff != "" {
				t.Errorf("timings set in values (-want +got):\n%s", diff)
			}

			if _, err := renderOperator(t, operator, map[string]any{"leaderElection": map[string]any{"leaseDuration": "6"}}); err == nil {
				t.Error("leaseDuration 6 (no unit) rendered; want a schema error")
			}
		})
	}
}

func TestProbesComeFromValues(t *testing.T) {
	for _, operator := range Operators {
		t.Run(operator, func(t *testing.T) {
			d, err := renderOperator(t, operator, map[string]any{"probes": map[string]any{
				"liveness":  map[string]any{"periodSeconds": 7, "failureThreshold": 2},
				"readiness": map[string]any{"periodSeconds": 3},
			}})
			if err != nil {
				t.Fatal(err)
			}
			c := d.Spec.Template.Spec.Containers[0]
			if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet == nil {
				t.Fatalf("probes missing: liveness %v, readiness %v", c.LivenessProbe, c.ReadinessProbe)
			}
			got := []any{c.LivenessProbe.HTTPGet.Path, c.LivenessProbe.PeriodSeconds, c.LivenessProbe.FailureThreshold, c.ReadinessProbe.HTTPGet.Path, c.ReadinessProbe.PeriodSeconds}
			if diff := cmp.Diff([]any{"/healthz", int32(7), int32(2), "/readyz", int32(3)}, got); diff != "" {
				t.Errorf("probes (-want +got):\n%s", diff)
			}
			if _, err := renderOperator(t, operator, map[string]any{"probes": map[string]any{"liveness": map[string]any{"exec": map[string]any{}}}}); err == nil {
				t.Error("an unknown probe key rendered; want a schema error")
			}
		})
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
