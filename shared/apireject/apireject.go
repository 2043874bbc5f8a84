package apireject

import (
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Is reports whether err is the API server rejecting the object itself:
// 422 Invalid (field validation, CRD CEL rules), 400 BadRequest (a
// malformed object) or 413 "request is too large" (or etcd's own limit,
// which the API server reports as an internal error). Retrying the same
// object cannot succeed; only a change of the spec it was derived from
// can. Conflicts, timeouts, missing namespaces, permission and server
// errors are not rejections: a retry may pass.
func Is(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	if apierrors.IsInternalError(err) && strings.Contains(err.Error(), "request is too large") {
		// etcd's limit on a value surfaces as an internal error.
		return true
	}
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code == http.StatusRequestEntityTooLarge
}

// Message is the API server's own message for a rejection, which names
// the field and the rule; for other errors it is err's text.
func Message(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}
