package tokenbudget

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReviewFunc asks the API server about a token, as a TokenReview does.
type ReviewFunc func(ctx context.Context, token string) (authenticationv1.TokenReviewStatus, error)

// TokenReviewer creates TokenReviews for audiences (none: the API
// server's own) with c, which should be a client of its own so the
// reviews never spend the reconcilers' budget of API requests.
func TokenReviewer(c client.Client, audiences ...string) ReviewFunc {
	return func(ctx context.Context, token string) (authenticationv1.TokenReviewStatus, error) {
		tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}
		if err := c.Create(ctx, tr); err != nil {
			return authenticationv1.TokenReviewStatus{}, err
		}
		return tr.Status, nil
	}
}

// Options bound what reviewing tokens may cost.
type Options struct {
	// Rate and Burst are the token bucket of TokenReviews per second for
	// the whole endpoint; a review beyond it is refused at once.
	Rate  float64
	Burst int
	// CacheTTL is the longest a successful review is trusted; never past
	// the token's own expiry.
	CacheTTL time.Duration
	// NegativeTTL is how long a refused token stays refused without
	// asking again.
	NegativeTTL time.Duration
	// CacheSize bounds the remembered reviews, successful and refused.
	CacheSize int
	// CacheWithoutExpiry reuses a successful review of a token whose
	// expiry cannot be read (a ServiceAccount token Secret's, which never
	// expires) for CacheTTL; without it such a review is not remembered.
	CacheWithoutExpiry bool
}

// Observer counts what the reviews cost; every method may be called
// concurrently. A nil Observer counts nothing.
type Observer interface {
	// CacheHit: a request was answered from the cache.
	CacheHit(authenticated bool)
	// Throttled: a review was refused for the budget.
	Throttled()
	// Reviewed: a TokenReview was made, with its result: authenticated,
	// refused or error.
	Reviewed(result string)
}

// Throttled is the error of a review the budget had no room for.
type Throttled struct {
	// Wait is how long until the budget has room again.
	Wait time.Duration
}

func (t *Throttled) Error() string {
	return fmt.Sprintf("too many tokens to check right now; retry in %s", t.Wait)
}

// Reviews asks the API server whom a token belongs to within a budget,
// and remembers the answers by the token's SHA-256 (never the token
// itself): a success until the token expires (at most CacheTTL), a
// refusal for NegativeTTL. Concurrent requests with one unknown token
// share one review. check turns a review's answer into what the caller
// needs, T, or a refusal, which is remembered like the API server's.
type Reviews[T any] struct {
	review   ReviewFunc
	check    func(authenticationv1.TokenReviewStatus) (T, error)
	opts     Options
	budget   *rate.Limiter
	cache    *cache.LRUExpireCache
	flight   singleflight.Group
	clock    clock
	observer Observer
}

// NewReviews makes Reviews; now is the clock, nil for time.Now.
func NewReviews[T any](review ReviewFunc, check func(authenticationv1.TokenReviewStatus) (T, error), o Options, now func() time.Time, observer Observer) *Reviews[T] {
	if now == nil {
		now = time.Now
	}
	if observer == nil {
		observer = uncounted{}
	}
	return &Reviews[T]{
		review:   review,
		check:    check,
		opts:     o,
		budget:   rate.NewLimiter(rate.Limit(o.Rate), o.Burst),
		cache:    cache.NewLRUExpireCacheWithClock(max(o.CacheSize, 1), clock(now)),
		clock:    clock(now),
		observer: observer,
	}
}

// reviewed is a remembered review: what check made of it, or its refusal.
type reviewed[T any] struct {
	value T
	err   error
}

// ErrNotCached is Cached's answer for a token it does not know.
var ErrNotCached = errors.New("no review of the token is remembered")

// Cached is the remembered answer for token, or ErrNotCached; it never
// reviews, so a caller can spend a budget of its own before Review.
func (t *Reviews[T]) Cached(token string) (T, error) {
	key := sha256.Sum256([]byte(token))
	v, ok := t.cache.Get(key)
	if !ok {
		var zero T
		return zero, ErrNotCached
	}
	r := v.(reviewed[T])
	t.observer.CacheHit(r.err == nil)
	return r.value, r.err
}

// Review returns what check made of token's review, from the cache or a
// new review. Its errors are a refusal (check's), *Throttled, or the
// review's own failure, which is not remembered.
func (t *Reviews[T]) Review(ctx context.Context, token string) (T, error) {
	if v, err := t.Cached(token); !errors.Is(err, ErrNotCached) {
		return v, err
	}
	key := sha256.Sum256([]byte(token))
	v, err, _ := t.flight.Do(string(key[:]), func() (any, error) {
		// A review that finished while this caller waited for the lock of
		// the flight is in the cache already.
		if v, ok := t.cache.Get(key); ok {
			r := v.(reviewed[T])
			return r.value, r.err
		}
		return t.reviewOnce(ctx, token, key)
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

// reviewOnce spends one TokenReview of the budget, or refuses at once
// when none is left: waiting would queue callers without bound.
func (t *Reviews[T]) reviewOnce(ctx context.Context, token string, key [sha256.Size]byte) (T, error) {
	var zero T
	now := t.clock.Now()
	if !t.budget.AllowN(now, 1) {
		t.observer.Throttled()
		r := t.budget.ReserveN(now, 1)
		wait := r.DelayFrom(now)
		r.CancelAt(now)
		return zero, &Throttled{Wait: wait}
	}
	st, err := t.review(ctx, token)
	if err != nil {
		t.observer.Reviewed("error")
		return zero, fmt.Errorf("reviewing the token: %w", err)
	}
	value, err := t.check(st)
	if err != nil {
		t.observer.Reviewed("refused")
		t.cache.Add(key, reviewed[T]{err: err}, t.opts.NegativeTTL)
		return zero, err
	}
	t.observer.Reviewed("authenticated")
	if ttl := t.trustFor(token, now); ttl > 0 {
		t.cache.Add(key, reviewed[T]{value: value}, ttl)
	}
	return value, nil
}

// trustFor is how long a successful review of token may be reused: until
// the token's expiry, at most CacheTTL. The expiry is read from the JWT's
// claims without checking their signature; the review just proved the
// token, and a token whose expiry cannot be read is remembered only with
// CacheWithoutExpiry.
func (t *Reviews[T]) trustFor(token string, now time.Time) time.Duration {
	exp, ok := expiry(token)
	if !ok {
		if t.opts.CacheWithoutExpiry {
			return t.opts.CacheTTL
		}
		return 0
	}
	return min(exp.Sub(now), t.opts.CacheTTL)
}

// expiry reads the exp claim of a JWT.
func expiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil || *claims.Exp <= 0 || *claims.Exp > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(int64(*claims.Exp), 0), true
}

// uncounted is the Observer that counts nothing.
type uncounted struct{}

func (uncounted) CacheHit(bool)   {}
func (uncounted) Throttled()      {}
func (uncounted) Reviewed(string) {}
