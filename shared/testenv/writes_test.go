package testenv

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParsePath(t *testing.T) {
	cases := map[string]struct {
		path               string
		resource, ns, name string
	}{
		"core namespaced create":  {path: "/api/v1/namespaces/ns/events", resource: "events", ns: "ns"},
		"core named":              {path: "/api/v1/namespaces/ns/pods/p", resource: "pods", ns: "ns", name: "p"},
		"core subresource":        {path: "/api/v1/namespaces/ns/pods/p/status", resource: "pods/status", ns: "ns", name: "p"},
		"namespace itself":        {path: "/api/v1/namespaces/ns", resource: "namespaces", ns: "ns", name: "ns"},
		"namespace list":          {path: "/api/v1/namespaces", resource: "namespaces"},
		"namespace finalize":      {path: "/api/v1/namespaces/ns/finalize", resource: "namespaces/finalize", ns: "ns", name: "ns"},
		"namespace status":        {path: "/api/v1/namespaces/ns/status", resource: "namespaces/status", ns: "ns", name: "ns"},
		"group namespaced status": {path: "/apis/testing.mlplatform.dev/v1alpha1/namespaces/ns/widgets/w/status", resource: "widgets/status", ns: "ns", name: "w"},
		"group cluster scoped":    {path: "/apis/rbac.authorization.k8s.io/v1/clusterroles/r", resource: "clusterroles", name: "r"},
		"cluster scoped status":   {path: "/apis/features.mlplatform.dev/v1alpha1/featurestorebackends/pg/status", resource: "featurestorebackends/status", name: "pg"},
		"lease":                   {path: "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", resource: "leases", ns: "ns", name: "l"},
		"not an API path":         {path: "/healthz", resource: "/healthz"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resource, ns, objName := parsePath(tc.path)
			if resource != tc.resource || ns != tc.ns || objName != tc.name {
				t.Errorf("parsePath(%q) = %q, %q, %q; want %q, %q, %q", tc.path, resource, ns, objName, tc.resource, tc.ns, tc.name)
			}
		})
	}
}

// TestWriteViewsCountOnlyTheirOwnObjects is what the write-count
// assertions rely on: writes into another namespace, and to other
// cluster-scoped objects, stay out of a test's view.
func TestWriteViewsCountOnlyTheirOwnObjects(t *testing.T) {
	counter := NewWriteCounter()
	cs := clientset(t, counter.Wrap(env.Config))
	ctx := t.Context()
	mine := CreateNamespace(t, clientFor(t), "mine")
	theirs := CreateNamespace(t, clientFor(t), "theirs")
	for _, ns := range []string{mine, theirs, theirs} {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "cm-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: cm.Name + ".event"},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: cm.Name, UID: cm.UID},
			Reason:         "Tested", Message: "counted", Type: corev1.EventTypeNormal,
		}
		if _, err := cs.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("writes-view-%s", mine)}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	view := counter.Namespace(mine)
	if got := view.Count("create", "configmaps"); got != 1 {
		t.Errorf("configmap creates in %s = %d, want 1; view %s, all %s", mine, got, view, counter)
	}
	if got := view.Total(); got != 2 {
		t.Errorf("writes in %s = %d, want 2 (a configmap and its event); view %s", mine, got, view)
	}
	if got := counter.Namespace(theirs).Total(); got != 4 {
		t.Errorf("writes in %s = %d, want 4", theirs, got)
	}
	if got := counter.Total(); got != 8 {
		t.Errorf("all writes = %d, want 8; all %s", got, counter)
	}
	// A cluster-scoped object is singled out by name, the name of a create
	// coming from its body.
	named := counter.Matching(func(w Write) bool { return w.Resource == "clusterroles" && w.Name == role.Name })
	if got := named.Snapshot(); got["create clusterroles"] != 1 || got["delete clusterroles"] != 1 || len(got) != 2 {
		t.Errorf("writes to clusterrole %s = %v, want one create and one delete", role.Name, got)
	}
	events := counter.Matching(func(w Write) bool { return w.Resource == "events" && w.Namespace == mine })
	if ws := events.Writes(); len(ws) != 1 || ws[0].Name == "" {
		t.Errorf("event writes in %s = %+v, want one, named from its body", mine, ws)
	}
	counter.Reset()
	if view.Total() != 0 || counter.Total() != 0 {
		t.Errorf("after Reset: view %s, all %s", view, counter)
	}
}
