package progress

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// limiters keeps one token bucket per TrainingJob, so one chatty training
// cannot crowd out the others or the operator's API budget.
type limiters struct {
	mu      sync.Mutex
	every   rate.Limit
	burst   int
	buckets map[types.UID]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// idleBucket is how long an unused bucket is kept; a full bucket forgotten
// is the same as a new one.
const idleBucket = 10 * time.Minute

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{every: rate.Limit(perSecond), burst: burst, buckets: map[types.UID]*bucket{}}
}

// allow takes a token for job at now; when none is left it returns how
// long until one is.
func (l *limiters) allow(job types.UID, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[job]
	if !ok {
		l.forgetIdle(now)
		b = &bucket{lim: rate.NewLimiter(l.every, l.burst)}
		l.buckets[job] = b
	}
	b.used = now
	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	r := b.lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	if !r.OK() || wait == rate.InfDuration {
		wait = time.Duration(math.MaxInt32) * time.Second
	}
	return false, wait
}

func (l *limiters) forgetIdle(now time.Time) {
	for uid, b := range l.buckets {
		if now.Sub(b.used) > idleBucket {
			delete(l.buckets, uid)
		}
	}
}
