package kube

import "encoding/json"

// MergePatchAt builds a JSON merge patch that sets one field.
func MergePatchAt(path []string, value any) ([]byte, error) {
	var v = value
	for i := len(path) - 1; i >= 0; i-- {
		v = map[string]any{path[i]: v}
	}
	return json.Marshal(v)
}
