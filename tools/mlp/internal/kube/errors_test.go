package kube

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestNotFoundIsRewrittenOnlyForTheObjectItNames: a 404 is said as "<Kind>
// <name> not found" only when the server's details name that resource and
// that object; any other 404 (the namespace, another object, no details)
// keeps the server's own message.
func TestNotFoundIsRewrittenOnlyForTheObjectItNames(t *testing.T) {
	trainingjobs := TrainingJobKind.GVR().GroupResource()
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"the object": {
			err:  apierrors.NewNotFound(trainingjobs, "mnist"),
			want: `TrainingJob "mnist" not found in namespace "team-b"`,
		},
		"its namespace": {
			err:  apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "team-b"),
			want: `namespaces "team-b" not found`,
		},
		"another object of the kind": {
			err:  apierrors.NewNotFound(trainingjobs, "bert"),
			want: `trainingjobs.training.mlplatform.dev "bert" not found`,
		},
		"a resource of the same name in another group": {
			err:  apierrors.NewNotFound(schema.GroupResource{Group: "kubeflow.org", Resource: "trainingjobs"}, "mnist"),
			want: `trainingjobs.kubeflow.org "mnist" not found`,
		},
		"a 404 that names no object": {
			err:  apierrors.NewGenericServerResponse(404, "get", trainingjobs, "", "the proxy found no such page", 0, false),
			want: "the server could not find the requested resource (get trainingjobs.training.mlplatform.dev)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Explain(tc.err, TrainingJobKind, "get", "mnist", "team-b")
			if got.Error() != tc.want {
				t.Errorf("Explain = %q, want %q", got, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("Explain lost the API error: %#v", got)
			}
		})
	}
}

// TestCoreNotFoundIsRewrittenOnlyForTheObjectItNames is the same for
// built-in resources, whose subresources (pods/log) are about the object.
func TestCoreNotFoundIsRewrittenOnlyForTheObjectItNames(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for name, tc := range map[string]struct {
		err      error
		resource string
		want     string
	}{
		"the pod": {
			err: apierrors.NewNotFound(pods, "job-0"), resource: "pods",
			want: `pods "job-0" not found in namespace "team-b"`,
		},
		"the pod of a subresource": {
			err: apierrors.NewNotFound(pods, "job-0"), resource: "pods/log",
			want: `pods/log "job-0" not found in namespace "team-b"`,
		},
		"its namespace": {
			err: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "team-b"), resource: "pods",
			want: `namespaces "team-b" not found`,
		},
		"a secret of the same name": {
			err: apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "job-0"), resource: "pods",
			want: `secrets "job-0" not found`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ExplainCore(tc.err, tc.resource, "get", "job-0", "team-b"); got.Error() != tc.want {
				t.Errorf("ExplainCore = %q, want %q", got, tc.want)
			}
		})
	}
}
