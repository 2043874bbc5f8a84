package harness

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// PodIP is what ContainerEnv gives status.podIP: test pods have no IP,
// and a placeholder keeps the variables built from it comparable.
const PodIP = "<podIP>"

// envRef is a $(VAR) reference inside a variable's value.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// fieldPath matches a field reference to one of the pod's annotations or
// labels.
var fieldPath = regexp.MustCompile(`^metadata\.(annotations|labels)\['([^']+)'\]$`)

// ContainerEnv resolves the environment of a pod's container as the
// kubelet does: later definitions win, $(VAR) expands from the variables
// defined before it, field references read the pod (its annotations, labels
// and name; status.podIP is PodIP). It fails on a reference it cannot resolve,
// so a variable the kubelet would leave unexpanded is never taken as a
// value.
func ContainerEnv(pod *corev1.Pod, container string) (map[string]string, error) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil, fmt.Errorf("pod %s has no container %s", pod.Name, container)
	}
	out := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			var err error
			if v, err = fieldValue(pod, e.ValueFrom); err != nil {
				return nil, fmt.Errorf("pod %s: %s: %w", pod.Name, e.Name, err)
			}
		}
		var missing []string
		out[e.Name] = envRef.ReplaceAllStringFunc(v, func(m string) string {
			name := envRef.FindStringSubmatch(m)[1]
			val, ok := out[name]
			if !ok {
				missing = append(missing, name)
			}
			return val
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("pod %s: %s refers to %v, not defined before it", pod.Name, e.Name, missing)
		}
	}
	return out, nil
}

func fieldValue(pod *corev1.Pod, src *corev1.EnvVarSource) (string, error) {
	if src.FieldRef == nil {
		return "", fmt.Errorf("only field references are resolved, got %+v", src)
	}
	path := src.FieldRef.FieldPath
	if m := fieldPath.FindStringSubmatch(path); m != nil {
		from := pod.Annotations
		if m[1] == "labels" {
			from = pod.Labels
		}
		v, ok := from[m[2]]
		if !ok {
			return "", fmt.Errorf("the pod has no %s %s", m[1], m[2])
		}
		return v, nil
	}
	switch path {
	case "status.podIP":
		return PodIP, nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	}
	return "", fmt.Errorf("field %s is not resolved here", path)
}

// EnvDiff compares the resolved environment of a pod's container (see
// ContainerEnv) with a framework's documented variables: every documented
// variable with its value, and no other variable but the platform's own.
// It returns a go-cmp diff (-documented +pod), empty when they agree.
func EnvDiff(pod *corev1.Pod, container string, documented map[string]string) (string, error) {
	got, err := ContainerEnv(pod, container)
	if err != nil {
		return "", err
	}
	return cmp.Diff(normalJSON(documented), frameworkEnv(got)), nil
}

// frameworkEnv is env without the platform's own variables (MLPLATFORM_*
// and the completion index the native backend defines for the others to
// refer to), with the values that are JSON documents (TF_CONFIG)
// re-encoded so that their key order does not count: what a framework's
// documented environment is compared with.
func frameworkEnv(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, "MLPLATFORM_") || k == "JOB_COMPLETION_INDEX" {
			continue
		}
		out[k] = v
	}
	return normalJSON(out)
}

// normalJSON re-encodes the values of env that are JSON objects.
func normalJSON(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		var doc map[string]any
		if strings.HasPrefix(v, "{") && json.Unmarshal([]byte(v), &doc) == nil {
			if b, err := json.Marshal(doc); err == nil {
				v = string(b)
			}
		}
		out[k] = v
	}
	return out
}
