package finalizer

import (
	"errors"
	"fmt"
)

// DependencyError says a cleanup could not run because something it needs
// is missing or unusable: the external resource is still there. See the
// package documentation for why this is never success.
type DependencyError struct {
	// Dependency names what is missing, for the condition and the event,
	// e.g. "admin Secret featurestore-system/pg-admin".
	Dependency string
	Err        error
}

func (e *DependencyError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("cleanup cannot run: %s is missing", e.Dependency)
	}
	return fmt.Sprintf("cleanup cannot run: %s is missing or unusable: %v", e.Dependency, e.Err)
}

func (e *DependencyError) Unwrap() error { return e.Err }

// MissingDependency wraps err, the failure to obtain dependency, as a
// DependencyError. A cleanup returns it when, for example, the admin
// Secret it logs in with does not exist.
func MissingDependency(dependency string, err error) error {
	return &DependencyError{Dependency: dependency, Err: err}
}

// IsMissingDependency reports whether err is, or wraps, a DependencyError.
func IsMissingDependency(err error) bool {
	var d *DependencyError
	return errors.As(err, &d)
}

// BlockedError says an object cannot go yet because others still need it,
// such as a backend its FeatureStores use. It is no failure: Finalize keeps
// the finalizer and sets Condition True with Reason and Message, without
// CleanupFailed, a deadline or a timed retry (the watches on what blocks the
// object bring it back), and records a Warning event named after the
// condition when the message changed.
type BlockedError struct {
	Condition, Reason, Message string
}

func (e *BlockedError) Error() string { return e.Message }

// Blocked returns a BlockedError; a CleanupFunc returns it while the object
// is still in use.
func Blocked(condition, reason, message string) error {
	return &BlockedError{Condition: condition, Reason: reason, Message: message}
}
