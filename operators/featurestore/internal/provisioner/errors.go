package provisioner

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PrivilegeError says the admin account logged in but lacks something the
// operator needs; a person must grant it.
type PrivilegeError struct{ Reason string }

func (e *PrivilegeError) Error() string { return e.Reason }

// IsPrivilegeError reports whether err is, or wraps, a PrivilegeError.
func IsPrivilegeError(err error) bool {
	var p *PrivilegeError
	return errors.As(err, &p)
}

// TimeoutError says an operation on a server gave up at one of the
// operator's bounds instead of waiting on: the server did not answer in
// time, or something on it, such as a lock another session held, kept the
// operation waiting. Reason says which, for the FeatureStore's condition
// and events; the operation is retried.
type TimeoutError struct {
	Reason string
	Err    error
}

func (e *TimeoutError) Error() string { return e.Reason + ": " + e.Err.Error() }

func (e *TimeoutError) Unwrap() error { return e.Err }

// IsTimeout reports whether err is, or wraps, a TimeoutError.
func IsTimeout(err error) bool {
	var t *TimeoutError
	return errors.As(err, &t)
}

// Bounded runs op with a deadline timeout from now, so that no server can
// hold the caller (a reconcile, and with it one of the operator's few
// workers) for longer. Reaching the deadline is reported as a TimeoutError
// saying that what did not finish; the caller's own cancellation (the
// operator stopping) and a TimeoutError op returned itself are returned as
// they are.
func Bounded(ctx context.Context, timeout time.Duration, what string, op func(context.Context) error) error {
	opCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := op(opCtx)
	if err == nil || IsTimeout(err) || ctx.Err() != nil || !errors.Is(opCtx.Err(), context.DeadlineExceeded) {
		return err
	}
	return &TimeoutError{
		Reason: fmt.Sprintf("%s did not finish within %s, the operator's bound on one operation, and is retried", what, timeout),
		Err:    err,
	}
}
