package testenv

import "testing"

func TestResourceOf(t *testing.T) {
	cases := map[string]struct {
		path string
		want string
	}{
		"core namespaced":         {path: "/api/v1/namespaces/ns/events", want: "events"},
		"core named":              {path: "/api/v1/namespaces/ns/pods/p", want: "pods"},
		"core subresource":        {path: "/api/v1/namespaces/ns/pods/p/status", want: "pods/status"},
		"namespace itself":        {path: "/api/v1/namespaces/ns", want: "namespaces"},
		"namespace list":          {path: "/api/v1/namespaces", want: "namespaces"},
		"namespace finalize":      {path: "/api/v1/namespaces/ns/finalize", want: "namespaces/finalize"},
		"group namespaced status": {path: "/apis/testing.mlplatform.dev/v1alpha1/namespaces/ns/widgets/w/status", want: "widgets/status"},
		"group cluster scoped":    {path: "/apis/rbac.authorization.k8s.io/v1/clusterroles/r", want: "clusterroles"},
		"lease":                   {path: "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", want: "leases"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := resourceOf(tc.path); got != tc.want {
				t.Errorf("resourceOf(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}
