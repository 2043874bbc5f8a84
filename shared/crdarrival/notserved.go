package crdarrival

import (
	"errors"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NotServed reports whether err says that the API server does not serve
// the kind of the request (any more), as when its CRD was deleted: the
// REST mapper knows no such kind (meta.NoKindMatchError and the like), no
// API handler answered the request's 404 (a missing object or namespace is
// answered with a Status that names it; a resource nobody serves, with a
// bare "404 page not found", which client-go reports as an unexpected
// server response), or the API server refused a create because the kind's
// CRD is being deleted. A missing namespace, a missing object or any other
// refusal is not that.
func NotServed(err error) bool {
	if err == nil {
		return false
	}
	if meta.IsNoMatchError(err) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	switch {
	case apierrors.IsNotFound(err):
		return st.Details != nil && slices.ContainsFunc(st.Details.Causes, func(c metav1.StatusCause) bool {
			return c.Type == metav1.CauseTypeUnexpectedServerResponse
		})
	case apierrors.IsForbidden(err):
		// apiextensions-apiserver's forbidCreateAdmission: a plain 403,
		// whose words are all that identifies it.
		return strings.Contains(st.Message, "custom resource definition is terminating")
	}
	return false
}
