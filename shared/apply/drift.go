package apply

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
)

// Drift returns the path of the first field that desired sets and live lacks
// or holds with another value, or "" when live carries every field desired
// sets. Only desired's fields count: whatever else live holds belongs to
// other actors (defaults filled in by the API server, a nodeSelector or
// tolerations injected by Kueue, a sidecar added by a webhook) and is no
// drift. The informer cache strips managedFields, so the comparison is
// made between the two objects' contents rather than by asking which
// field manager owns what.
//
// Lists are compared as sets of what desired sets: every element of a
// desired list must be carried by some element of the live list, and extra
// live elements are somebody else's. That matches server-side apply for
// the keyed lists the operator writes (containers, env, volumes, ports by
// name or key); for the few atomic lists it is lenient on purpose, so that
// an entry another actor appended never makes the operator rewrite the
// object over and over. A nil (JSON null) desired value and an empty
// desired list set nothing.
//
// The exact paths (such as "spec.ingress") are the exceptions: there live
// must hold what desired sets and nothing more, for lists whose extra
// elements change what the object means (a NetworkPolicy's rule that
// admits more) and that server-side apply replaces whole (atomic lists).
func Drift(desired, live runtime.Object, exact ...string) (string, error) {
	want, err := content(desired)
	if err != nil {
		return "", err
	}
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return "", fmt.Errorf("converting the live %T: %w", live, err)
	}
	// Type information is often absent from objects read from the cache.
	delete(want, "apiVersion")
	delete(want, "kind")
	return find("", want, have, exact), nil
}

func find(path string, want, have any, exact []string) string {
	if path != "" && slices.Contains(exact, path) {
		if !reflect.DeepEqual(want, have) {
			return path
		}
		return ""
	}
	switch w := want.(type) {
	case nil:
		return ""
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			// Even an empty desired object, such as `emptyDir: {}`,
			// must be present: it selects a kind of volume.
			return orRoot(path)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p := find(join(path, k), w[k], h[k], exact); p != "" {
				return p
			}
		}
		return ""
	case []any:
		if len(w) == 0 {
			return ""
		}
		h, ok := have.([]any)
		if !ok {
			return orRoot(path)
		}
		for i, we := range w {
			if !slices.ContainsFunc(h, func(he any) bool { return find("", we, he, nil) == "" }) {
				return fmt.Sprintf("%s[%s]", orRoot(path), label(i, we))
			}
		}
		return ""
	default:
		if !reflect.DeepEqual(want, have) {
			return orRoot(path)
		}
		return ""
	}
}

// label names a list element in a path: by its name when it has one, as
// people and server-side apply know it, else by its index.
func label(i int, elem any) string {
	if m, ok := elem.(map[string]any); ok {
		for _, key := range []string{"name", "mountPath", "key"} {
			if v, ok := m[key].(string); ok {
				return key + "=" + v
			}
		}
	}
	return fmt.Sprint(i)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return path
}
