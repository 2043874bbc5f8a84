package finalizer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/metrics"
	"github.com/ml-platform/ml-platform/shared/patch"
)

// Object is what a finalizer guards: an API object with conditions.
type Object interface {
	client.Object
	conditions.Object
}

// CleanupFunc removes what obj provisioned outside its owner references. It
// must be idempotent: it runs again after every failure and after operator
// restarts. It returns nil only when the external resource is gone (removed
// now or already absent, which it decides itself where it looked for the
// resource). Any error keeps the finalizer, a Kubernetes NotFound included:
// wrap a missing dependency (an admin Secret, a backend object) with
// MissingDependency so the condition says what to restore.
type CleanupFunc func(ctx context.Context, obj Object) error

// HandoffFunc records cleanup that could not finish before the object must
// go (its namespace is being deleted), somewhere that outlives the
// namespace, so the operator can finish it later. The finalizer is released
// only after it succeeds.
type HandoffFunc func(ctx context.Context, obj Object, cleanupErr error) error

// Defaults for Finalizer's durations.
const (
	DefaultDeadline       = 15 * time.Minute
	DefaultNamespaceGrace = 2 * time.Minute
	minRetry              = time.Second
	maxRetry              = 5 * time.Minute
)

// Event reasons the finalizer emits on the object.
const (
	EventCleanupSucceeded = "CleanupSucceeded"
	EventCleanupFailed    = "CleanupFailed"
	EventCleanupAbandoned = "CleanupAbandoned"
)

var (
	cleanupFailures = metrics.NewCounterVec("finalizer", "cleanup_failures_total",
		"Failed attempts to clean up external resources behind a finalizer.", "finalizer")
	cleanupAbandoned = metrics.NewCounterVec("finalizer", "cleanup_abandoned_total",
		"Finalizers released without a finished cleanup, by reason (annotation or namespace_terminating).", "finalizer", "reason")
)

// Finalizer guards the cleanup of one kind's external resources.
type Finalizer struct {
	// Name is the finalizer, "<api group>/<purpose>", e.g.
	// "features.mlplatform.dev/cleanup".
	Name string
	// Cleanup removes the external resources.
	Cleanup CleanupFunc
	// Handoff, when set, is called before the finalizer is released in a
	// terminating namespace while cleanup still fails.
	Handoff HandoffFunc
	// Deadline after the deletion request past which a failing cleanup
	// marks the object Stalled.
	Deadline time.Duration
	// NamespaceGrace is how long cleanup may fail once the object's
	// namespace is terminating before the finalizer is released anyway, so
	// that namespace deletion always completes.
	NamespaceGrace time.Duration

	Client client.Client
	// APIReader reads namespaces and conflicting objects from the API server
	// directly (manager.GetAPIReader()).
	APIReader client.Reader
	Recorder  record.EventRecorder
	// Released is the message of the CleanupSucceeded event when the
	// finalizer is released after Cleanup; "External resources cleaned up"
	// when empty.
	Released string
	// Clock says how long a cleanup has been failing (against the
	// deadline and the namespace grace); the real clock when nil.
	Clock clock.PassiveClock
}

// AbandonAnnotation is the annotation that makes the finalizer release
// without cleanup: "<api group>/abandon-cleanup", with the group taken from
// the finalizer's name.
func (f *Finalizer) AbandonAnnotation() string {
	group, _, _ := strings.Cut(f.Name, "/")
	return group + "/" + commonv1alpha1.AnnotationAbandonCleanup
}

// Ensure adds the finalizer when it is missing, as its own patch. When it
// returns true the caller returns from Reconcile: the patch triggers the next
// reconcile, which starts from the persisted object.
func (f *Finalizer) Ensure(ctx context.Context, obj Object) (bool, error) {
	if controllerutil.ContainsFinalizer(obj, f.Name) || !obj.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	h, err := patch.NewHelper(obj, f.Client, f.APIReader)
	if err != nil {
		return false, err
	}
	controllerutil.AddFinalizer(obj, f.Name)
	if _, err := h.Patch(ctx, obj); err != nil {
		return false, err
	}
	return true, nil
}

// Finalize runs the deletion path of an object whose deletion was requested.
// It releases the finalizer once cleanup succeeds, when an authorized user
// abandoned cleanup, or when the namespace is being deleted and cleanup has
// failed past NamespaceGrace. While cleanup fails it keeps the finalizer,
// sets CleanupFailed (and Stalled past the deadline) through the status
// subresource, emits a Warning event and asks to be called again after a
// delay that grows with the time since the deletion request.
func (f *Finalizer) Finalize(ctx context.Context, obj Object) (ctrl.Result, error) {
	if obj.GetDeletionTimestamp().IsZero() || !controllerutil.ContainsFinalizer(obj, f.Name) {
		return ctrl.Result{}, nil
	}
	h, err := patch.NewHelper(obj, f.Client, f.APIReader)
	if err != nil {
		return ctrl.Result{}, err
	}

	if obj.GetAnnotations()[f.AbandonAnnotation()] == "true" {
		if err := f.release(ctx, h, obj); err != nil {
			return ctrl.Result{}, err
		}
		cleanupAbandoned.WithLabelValues(f.Name, "annotation").Inc()
		f.Recorder.Eventf(obj, corev1.EventTypeWarning, EventCleanupAbandoned,
			"Cleanup abandoned by annotation %s; external resources may remain and must be removed by hand", f.AbandonAnnotation())
		return ctrl.Result{}, nil
	}

	cleanupErr := f.Cleanup(ctx, obj)
	if cleanupErr == nil {
		if err := f.release(ctx, h, obj); err != nil {
			return ctrl.Result{}, err
		}
		f.Recorder.Event(obj, corev1.EventTypeNormal, EventCleanupSucceeded, cmp.Or(f.Released, "External resources cleaned up"))
		return ctrl.Result{}, nil
	}
	var blocked *BlockedError
	if errors.As(cleanupErr, &blocked) {
		return ctrl.Result{}, f.recordBlocked(ctx, h, obj, blocked)
	}
	cleanupFailures.WithLabelValues(f.Name).Inc()

	now := f.now()
	elapsed := now.Sub(obj.GetDeletionTimestamp().Time)
	retry := retryAfter(elapsed)

	terminating, err := NamespaceTerminating(ctx, f.APIReader, obj.GetNamespace())
	if err != nil {
		return ctrl.Result{}, err
	}
	if terminating {
		grace := orDefault(f.NamespaceGrace, DefaultNamespaceGrace)
		if elapsed >= grace {
			return ctrl.Result{}, f.releaseInTerminatingNamespace(ctx, h, obj, cleanupErr)
		}
		retry = min(retry, grace-elapsed)
	}

	return f.recordFailure(ctx, h, obj, cleanupErr, elapsed, retry)
}

// recordBlocked keeps the finalizer of an object still in use: its
// condition says by whom, and an event says it again when that changed.
func (f *Finalizer) recordBlocked(ctx context.Context, h *patch.Helper, obj Object, b *BlockedError) error {
	var before string
	if c := conditions.Get(obj, b.Condition); c != nil && c.Status == metav1.ConditionTrue {
		before = c.Message
	}
	conditions.MarkTrue(obj, b.Condition, b.Reason, b.Message)
	if _, err := h.Patch(ctx, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if before != b.Message {
		f.Recorder.Event(obj, corev1.EventTypeWarning, b.Condition, b.Message)
	}
	return nil
}

// recordFailure keeps the finalizer after a failed cleanup: CleanupFailed,
// Stalled past the deadline, a Warning event, and a retry no later than the
// deadline.
func (f *Finalizer) recordFailure(ctx context.Context, h *patch.Helper, obj Object, cleanupErr error, elapsed, retry time.Duration) (ctrl.Result, error) {
	log.FromContext(ctx).Error(cleanupErr, "Cleanup failed; keeping the finalizer", "finalizer", f.Name, "retryAfter", retry)
	message := fmt.Sprintf("Cleanup of external resources failed and is retried: %v", cleanupErr)
	reason := commonv1alpha1.ReasonCleanupError
	if IsMissingDependency(cleanupErr) {
		reason = commonv1alpha1.ReasonCleanupDependencyMissing
	}
	conditions.MarkTrue(obj, commonv1alpha1.ConditionCleanupFailed, reason, message)
	deadline := orDefault(f.Deadline, DefaultDeadline)
	if elapsed >= deadline {
		conditions.MarkStalled(obj, commonv1alpha1.ReasonCleanupDeadlineExceeded, fmt.Sprintf(
			"Cleanup has failed for more than %s (last error: %v). Fix the cause, or have a user allowed the abandon-cleanup verb set the annotation %s=true to delete without cleanup",
			deadline, cleanupErr, f.AbandonAnnotation()))
	} else {
		retry = min(retry, deadline-elapsed)
	}
	if _, err := h.Patch(ctx, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	f.Recorder.Event(obj, corev1.EventTypeWarning, EventCleanupFailed, message)
	return ctrl.Result{RequeueAfter: retry}, nil
}

func (f *Finalizer) releaseInTerminatingNamespace(ctx context.Context, h *patch.Helper, obj Object, cleanupErr error) error {
	if f.Handoff != nil {
		if err := f.Handoff(ctx, obj, cleanupErr); err != nil {
			return fmt.Errorf("handing off cleanup before the namespace goes: %w", err)
		}
	}
	if err := f.release(ctx, h, obj); err != nil {
		return err
	}
	cleanupAbandoned.WithLabelValues(f.Name, "namespace_terminating").Inc()
	// The namespace refuses new events while it terminates; the recorder
	// drops them without blocking, and the log line below remains.
	f.Recorder.Eventf(obj, corev1.EventTypeWarning, EventCleanupAbandoned,
		"Namespace is being deleted and cleanup still fails (%v); finalizer released", cleanupErr)
	log.FromContext(ctx).Info("Finalizer released in a terminating namespace while cleanup fails",
		"finalizer", f.Name, "handedOff", f.Handoff != nil, "cleanupError", cleanupErr.Error())
	return nil
}

func (f *Finalizer) release(ctx context.Context, h *patch.Helper, obj Object) error {
	controllerutil.RemoveFinalizer(obj, f.Name)
	_, err := h.Patch(ctx, obj)
	return client.IgnoreNotFound(err)
}

func (f *Finalizer) now() time.Time {
	if f.Clock != nil {
		return f.Clock.Now()
	}
	return clock.RealClock{}.Now()
}

// retryAfter grows the delay geometrically with the time since deletion was
// requested: waiting half the elapsed time makes each attempt 1.5 times
// later than the previous one, without a counter that a restart would lose.
func retryAfter(elapsed time.Duration) time.Duration {
	return min(max(elapsed/2, minRetry), maxRetry)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// NamespaceTerminating reports whether namespace is being deleted (or is
// already gone). Operators must not create objects there: the API server
// refuses them, and creating them would only delay the deletion.
func NamespaceTerminating(ctx context.Context, r client.Reader, namespace string) (bool, error) {
	if namespace == "" {
		return false, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	return !ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating, nil
}

// IsNamespaceTerminatingError reports whether err is the API server refusing
// a create because the namespace is being deleted.
func IsNamespaceTerminatingError(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
