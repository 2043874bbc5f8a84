package provisioner

import "errors"

// PrivilegeError says the admin account logged in but lacks something the
// operator needs; a person must grant it.
type PrivilegeError struct{ Reason string }

func (e *PrivilegeError) Error() string { return e.Reason }

// IsPrivilegeError reports whether err is, or wraps, a PrivilegeError.
func IsPrivilegeError(err error) bool {
	var p *PrivilegeError
	return errors.As(err, &p)
}
