package kube

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Explain turns an API error about one of our resources into a sentence a
// data scientist can act on. The server's own wording is kept where it is
// already precise (RBAC's verb and resource, CEL validation messages).
func Explain(err error, k Kind, verb, name, namespace string) error {
	if err == nil {
		return nil
	}
	if shown := unreachable(err); shown != nil {
		return shown
	}
	return wrapUser(err, explainKind(err, k, verb, name, namespace))
}

func explainKind(err error, k Kind, verb, name, namespace string) error {
	switch {
	case meta.IsNoMatchError(err) || isMissingResource(err, k):
		return fmt.Errorf("the %s is not installed in this cluster (the API %s is not served)", k.Operator, k.GVK.GroupVersion())
	case apierrors.IsForbidden(err):
		return forbidden(err, verb, k.Qualified(), namespace)
	case isNotFoundOf(err, k.GVK.Group, k.Resource, name):
		return fmt.Errorf("%s %q not found in namespace %q", k.GVK.Kind, name, namespace)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s %q already exists in namespace %q", k.GVK.Kind, name, namespace)
	case apierrors.IsInvalid(err):
		return invalid(err, k.GVK.Kind, name)
	}
	return err
}

// ExplainCore is Explain for built-in resources (pods, secrets, services).
func ExplainCore(err error, resource, verb, name, namespace string) error {
	if shown := unreachable(err); shown != nil {
		return shown
	}
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return wrapUser(err, forbidden(err, verb, resource, namespace))
	case isNotFoundOf(err, "", strings.SplitN(resource, "/", 2)[0], name):
		// A subresource (pods/log) is missing when its object is.
		return wrapUser(err, fmt.Errorf("%s %q not found in namespace %q", resource, name, namespace))
	}
	return err
}

// userError shows a user-facing message and keeps the API error for
// errors.As and apierrors.IsNotFound.
type userError struct {
	msg   string
	cause error
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.cause }

func wrapUser(cause, shown error) error {
	if errors.Is(shown, cause) {
		return cause
	}
	return &userError{msg: shown.Error(), cause: cause}
}

// isNotFoundOf says whether err is the server's 404 for the object name of
// the resource (its plural and API group, as the server names them in the
// details). Any other 404, such as that of a namespace that does not
// exist, is left in the server's own words.
func isNotFoundOf(err error, group, resource, name string) bool {
	var status apierrors.APIStatus
	if name == "" || !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Group == group && d.Kind == resource && d.Name == name
}

// isMissingResource recognises a 404 for the resource itself (the CRD was
// removed after discovery was cached): the details name the resource, not
// an object.
func isMissingResource(err error, k Kind) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name == "" && d.Group == "" && d.Kind == ""
}

// forbidden names the verb and resource that RBAC denied. The server's
// message already says who asked for what; it is kept and followed by
// what to do about it.
func forbidden(err error, verb, resource, namespace string) error {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "is forbidden: "); ok {
		msg = after
	}
	where := ""
	if namespace != "" {
		where = fmt.Sprintf(" in namespace %q", namespace)
	}
	return fmt.Errorf("permission denied: you may not %s %s%s (%s); ask your platform team for access", verb, resource, where, msg)
}

// invalid prints the server's validation messages one per line, which for
// our CRDs are the CEL rules' messages, without Go's wrapping.
func invalid(err error, kindName, name string) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q is invalid:", kindName, name)
	for _, c := range status.Status().Details.Causes {
		b.WriteString("\n  * ")
		if c.Field != "" {
			b.WriteString(c.Field + ": ")
		}
		b.WriteString(causeMessage(c))
	}
	return errors.New(b.String())
}

// causeMessage drops the `Invalid value: "object": ` prefix CEL rules on
// objects get, which says nothing to a user.
func causeMessage(c metav1.StatusCause) string {
	m := c.Message
	if _, after, ok := strings.Cut(m, `Invalid value: "object": `); ok {
		return after
	}
	return m
}
