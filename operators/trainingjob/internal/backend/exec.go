package backend

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// MaxEnvString is the most bytes Linux passes one environment variable to
// a program, "NAME=value" and its terminating NUL (MAX_ARG_STRLEN, 32
// pages of 4 KiB): execve refuses a longer one with "argument list too
// long", and the container never starts.
const MaxEnvString = 32 * 4096

// FitExec refuses framework variables that a container could not start
// with, such as a host list of every rank (TF_CONFIG, WORKER_ADDRS), which
// grows with the workers and with the job's and namespace's names. remedy
// says what to change.
func FitExec(env []corev1.EnvVar, remedy string) error {
	for _, e := range env {
		if n := len(e.Name) + len("=") + len(e.Value) + 1; n > MaxEnvString {
			return &InvalidSpecError{Err: fmt.Errorf(
				"%s would be %d bytes for this many workers, more than Linux passes a program in one environment variable (%d): %s",
				e.Name, n, MaxEnvString, remedy)}
		}
	}
	return nil
}
