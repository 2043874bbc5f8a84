package tokenbudget

import (
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
)

// Limiter keeps one token bucket per key: per TrainingJob, so one chatty
// training cannot crowd out the others, and per source address, so one
// caller is refused before it costs an authentication. Its memory is
// bounded: a bucket unused for idleBucket is forgotten (a full bucket
// forgotten is the same as a new one), and beyond maxKeys the least
// recently used bucket goes, so a flood from many sources cannot grow it.
type Limiter[K comparable] struct {
	mu      sync.Mutex
	every   rate.Limit
	burst   int
	clock   clock
	buckets *cache.LRUExpireCache
}

// idleBucket is how long an unused bucket is kept. It must outlast the
// time a drained bucket takes to refill, or forgetting it would refill it
// early; NewLimiter stretches it for slow rates.
const idleBucket = 10 * time.Minute

// clock adapts a time source to the caches' Clock.
type clock func() time.Time

func (c clock) Now() time.Time { return c() }

// NewLimiter keeps up to maxKeys buckets of perSecond and burst; now is
// the clock, nil for time.Now.
func NewLimiter[K comparable](perSecond float64, burst, maxKeys int, now func() time.Time) *Limiter[K] {
	if now == nil {
		now = time.Now
	}
	return &Limiter[K]{
		every:   rate.Limit(perSecond),
		burst:   burst,
		clock:   clock(now),
		buckets: cache.NewLRUExpireCacheWithClock(max(maxKeys, 1), clock(now)),
	}
}

// idle is how long a bucket is kept after its last use: idleBucket, or
// the time the bucket takes to fill up from empty when that is longer.
func (l *Limiter[K]) idle() time.Duration {
	refill := time.Duration(float64(l.burst) / float64(l.every) * float64(time.Second))
	if l.every <= 0 || refill <= 0 || refill > 100*365*24*time.Hour {
		return 100 * 365 * 24 * time.Hour
	}
	return max(idleBucket, refill)
}

// Allow takes a token for key; when none is left it returns how long
// until one is.
func (l *Limiter[K]) Allow(key K) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	var lim *rate.Limiter
	if v, ok := l.buckets.Get(key); ok {
		lim = v.(*rate.Limiter)
	} else {
		lim = rate.NewLimiter(l.every, l.burst)
	}
	// Adding again marks the bucket used now, so only idle ones expire.
	l.buckets.Add(key, lim, l.idle())
	if lim.AllowN(now, 1) {
		return true, 0
	}
	r := lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	if !r.OK() || wait == rate.InfDuration {
		wait = time.Duration(math.MaxInt32) * time.Second
	}
	return false, wait
}

// Source is the address a request came from: a pod's own IP in the
// cluster, never a header the caller chose.
func Source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// RetryAfter is a Retry-After header's whole seconds, at least 1.
func RetryAfter(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}
