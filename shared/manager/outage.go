package manager

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
)

// After an outage of the API server, client-go's reflectors come back only
// after their own backoff (0.8 s doubling to 30 s, with up to 100 % jitter,
// not configurable) and every object whose reconciles failed meanwhile
// waits out a per-object backoff that doubled on every failure: measured
// after a 30 s outage, a change was noticed 37 s and a failing object
// retried 29 s after the API server served again. The pieces below keep
// both short: the reflectors never see an unreachable API server, because
// their list and watch calls retry it themselves with a short, jittered,
// bounded backoff, and a reconcile that failed while the API server was
// unreachable is retried after about a second without growing its backoff.

// unreachableRetry is the base delay between attempts to reach an
// unreachable API server; attempts double up to unreachableRetryMax, each
// with up to 50 % jitter so that replicas and informers spread out.
const (
	unreachableRetry    = 200 * time.Millisecond
	unreachableRetryMax = time.Second
)

// apiServerHealth remembers whether the last request to the API server
// reached it, as the transport of every client of the manager sees it.
type apiServerHealth struct {
	unreachable atomic.Bool
}

// wrap makes h observe every request made through cfg.
func (h *apiServerHealth) wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			switch {
			case err != nil && isUnreachable(err):
				h.unreachable.Store(true)
			case err == nil && resp.StatusCode != http.StatusServiceUnavailable:
				h.unreachable.Store(false)
			}
			return resp, err
		})
	})
}

// Unreachable reports whether the API server could not be reached lately.
func (h *apiServerHealth) Unreachable() bool {
	return h != nil && h.unreachable.Load()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// isUnreachable tells errors of an API server that is down or restarting
// from answers of one that serves.
func isUnreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var opErr *net.OpError
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServiceUnavailable(err) || errors.As(err, &opErr)
}

// jittered returns d plus up to half of it at random.
func jittered(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/2+1))
}

// retryUnreachable calls f until it returns anything but an unreachable
// API server, or ctx ends.
func retryUnreachable[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	delay := unreachableRetry
	for logged := false; ; {
		v, err := f()
		if err == nil || !isUnreachable(err) {
			return v, err
		}
		if !logged {
			ctrl.Log.WithName("cache").Info("API server unreachable, retrying", "request", what, "err", err.Error())
			logged = true
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(jittered(delay)):
		}
		delay = min(2*delay, unreachableRetryMax)
	}
}

// patientListWatch retries the list and watch calls of an informer while
// the API server is unreachable, so that its reflector does not back off.
type patientListWatch struct {
	inner toolscache.ListerWatcherWithContext
}

func newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(&patientListWatch{inner: toolscache.ToListerWatcherWithContext(lw)}, obj, resync, indexers)
}

func (p *patientListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return retryUnreachable(ctx, "list", func() (runtime.Object, error) { return p.inner.ListWithContext(ctx, opts) })
}

func (p *patientListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return retryUnreachable(ctx, "watch", func() (watch.Interface, error) { return p.inner.WatchWithContext(ctx, opts) })
}

// List and Watch serve callers that do not pass a context.
func (p *patientListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

func (p *patientListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.WatchWithContext(context.Background(), opts)
}

// outageAwareRateLimiter retries an object about a second after a failure
// while the API server is unreachable, without counting the failure: the
// reconcile failed because of the outage, not the object, and its backoff
// must not have grown to many seconds when the API server is back.
type outageAwareRateLimiter[T comparable] struct {
	workqueue.TypedRateLimiter[T]
	health *apiServerHealth
}

func (r *outageAwareRateLimiter[T]) When(item T) time.Duration {
	if r.health.Unreachable() {
		return jittered(unreachableRetryMax)
	}
	return r.TypedRateLimiter.When(item)
}
