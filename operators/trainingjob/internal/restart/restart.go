package restart

import (
	"fmt"
	"time"

	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/failure"
)

// MaxDelay caps the exponential backoff between runs: beyond an hour a
// waiting job only wastes its place, and people should look at it.
const MaxDelay = time.Hour

// The defaults of the CRD, for objects created before the fields existed
// or built in tests without the API server's defaulting.
const (
	DefaultMaxRestarts           = 3
	DefaultRestartBackoffSeconds = 30
)

// Why a failed run is not restarted, as condition reasons.
const (
	ReasonNoCheckpoint    = "NoCheckpoint"
	ReasonResumeNever     = "ResumeNever"
	ReasonNotRetryable    = "NotRetryable"
	ReasonRestartsExhaust = "RestartsExhausted"
	// ReasonDeadline: the job's runPolicy.activeDeadlineSeconds ends
	// before the next run would start.
	ReasonDeadline = "DeadlineExceeded"
)

// Delay is the wait before the n-th restart (n >= 1): the base delay,
// doubled for every restart before it, at most MaxDelay.
func Delay(base time.Duration, n int32) time.Duration {
	if base <= 0 || n <= 0 {
		return 0
	}
	d := base
	for i := int32(1); i < n; i++ {
		d *= 2
		if d >= MaxDelay {
			return MaxDelay
		}
	}
	return min(d, MaxDelay)
}

// Decision says what follows a failed run.
type Decision struct {
	// Restart is true when a new run follows.
	Restart bool
	// NextRunTime is the earliest start of the new run.
	NextRunTime time.Time
	// Reason and Message explain a decision not to restart.
	Reason, Message string
}

// Decide applies the checkpoint's restart policy to a failed run, the
// restarts made so far and the failure's classification.
func Decide(cp *trainingv1alpha1.Checkpoint, restarts int32, f failure.Result, now time.Time) Decision {
	switch {
	case cp == nil:
		return Decision{Reason: ReasonNoCheckpoint, Message: "The job has no checkpoint, so a failure is final"}
	case cp.Resume == trainingv1alpha1.ResumeNever:
		return Decision{Reason: ReasonResumeNever, Message: "checkpoint.resume is Never, so a failure is final"}
	case !f.Retryable():
		return Decision{Reason: ReasonNotRetryable, Message: fmt.Sprintf("The failure (%s, class %s) is not one a new run fixes; not restarting", f.Cause, f.Class)}
	}
	limit := ptr.Deref(cp.MaxRestarts, DefaultMaxRestarts)
	if restarts >= limit {
		return Decision{Reason: ReasonRestartsExhaust, Message: fmt.Sprintf("%d of %d restarts used (maxRestarts)", restarts, limit)}
	}
	base := time.Duration(ptr.Deref(cp.RestartBackoffSeconds, DefaultRestartBackoffSeconds)) * time.Second
	return Decision{Restart: true, NextRunTime: now.Add(Delay(base, restarts+1))}
}
