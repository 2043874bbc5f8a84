package apireject

import (
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestIsAcceptsOnlyRejectionsOfTheObject(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "x",
		field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0")})
	tooLarge := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 413, Message: "etcdserver: request is too large"}}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"invalid":                 {err: invalid, want: true},
		"invalid, wrapped":        {err: fmt.Errorf("applying StatefulSet x: %w", invalid), want: true},
		"bad request":             {err: apierrors.NewBadRequest("the object is malformed"), want: true},
		"too large (typed)":       {err: apierrors.NewRequestEntityTooLargeError("limit is 3145728"), want: true},
		"too large (status code)": {err: tooLarge, want: true},
		"conflict":                {err: apierrors.NewConflict(gr, "x", errors.New("modified")), want: false},
		"already exists":          {err: apierrors.NewAlreadyExists(gr, "x"), want: false},
		"not found":               {err: apierrors.NewNotFound(gr, "x"), want: false},
		"forbidden":               {err: apierrors.NewForbidden(gr, "x", errors.New("no")), want: false},
		"timeout":                 {err: apierrors.NewTimeoutError("slow", 1), want: false},
		"server error":            {err: apierrors.NewInternalError(errors.New("etcd")), want: false},
		"etcd's size limit":       {err: apierrors.NewInternalError(errors.New("etcdserver: request is too large")), want: true},
		"too many requests":       {err: apierrors.NewTooManyRequests("later", int(time.Second.Seconds())), want: false},
		"plain error":             {err: errors.New("dial tcp: connection refused"), want: false},
		"nil":                     {err: nil, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Is(tc.err); got != tc.want {
				t.Errorf("Is(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestMessageIsTheAPIServersOwn(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "db",
		field.ErrorList{field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("resources", "requests"), "2", "must be less than or equal to cpu limit of 1")})
	got := Message(fmt.Errorf("applying StatefulSet db: %w", invalid))
	want := invalid.ErrStatus.Message
	if got != want {
		t.Errorf("Message() = %q, want the API server's %q", got, want)
	}
	if got := Message(errors.New("plain")); got != "plain" {
		t.Errorf("Message(plain) = %q", got)
	}
}
