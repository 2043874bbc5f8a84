package progress

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReviewFunc asks the API server about a token for Audience, as a
// TokenReview does.
type ReviewFunc func(ctx context.Context, token string) (authenticationv1.TokenReviewStatus, error)

// TokenReviewer creates TokenReviews with c, which should be a client of
// its own (reviewClient) so the reviews never spend the reconcilers'
// budget of API requests.
func TokenReviewer(c client.Client) ReviewFunc {
	return func(ctx context.Context, token string) (authenticationv1.TokenReviewStatus, error) {
		tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}}}
		if err := c.Create(ctx, tr); err != nil {
			return authenticationv1.TokenReviewStatus{}, err
		}
		return tr.Status, nil
	}
}

// ReviewOptions bound what reviewing tokens may cost.
type ReviewOptions struct {
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
}

// tokenReviews asks the API server whom a token belongs to within a
// budget, and remembers the answers by the token's SHA-256 (never the
// token itself): a success until the token expires (at most CacheTTL),
// a refusal for NegativeTTL. Concurrent requests with one unknown token
// share one review.
type tokenReviews struct {
	review  ReviewFunc
	opts    ReviewOptions
	budget  *rate.Limiter
	cache   *cache.LRUExpireCache
	flight  singleflight.Group
	clock   clock
	metrics *endpointMetrics
}

func newTokenReviews(review ReviewFunc, o ReviewOptions, now func() time.Time, m *endpointMetrics) *tokenReviews {
	if now == nil {
		now = time.Now
	}
	return &tokenReviews{
		review:  review,
		opts:    o,
		budget:  rate.NewLimiter(rate.Limit(o.Rate), o.Burst),
		cache:   cache.NewLRUExpireCacheWithClock(max(o.CacheSize, 1), clock(now)),
		clock:   clock(now),
		metrics: m,
	}
}

// reviewed is a remembered review: the bound pod, or the refusal.
type reviewed struct {
	pod boundPod
	err error
}

// boundPod returns the pod token is bound to, from the cache or a review.
func (t *tokenReviews) boundPod(ctx context.Context, token string) (boundPod, error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := t.cache.Get(key); ok {
		r := v.(reviewed)
		t.metrics.cacheHit(r.err == nil)
		return r.pod, r.err
	}
	v, err, _ := t.flight.Do(string(key[:]), func() (any, error) {
		// A review that finished while this caller waited for the lock of
		// the flight is in the cache already.
		if v, ok := t.cache.Get(key); ok {
			r := v.(reviewed)
			return r.pod, r.err
		}
		return t.reviewOnce(ctx, token, key)
	})
	if err != nil {
		return boundPod{}, err
	}
	return v.(boundPod), nil
}

// reviewOnce spends one TokenReview of the budget, or refuses at once
// when none is left: waiting would queue callers without bound.
func (t *tokenReviews) reviewOnce(ctx context.Context, token string, key [sha256.Size]byte) (boundPod, error) {
	now := t.clock.Now()
	if !t.budget.AllowN(now, 1) {
		t.metrics.throttled("tokenreview")
		r := t.budget.ReserveN(now, 1)
		wait := r.DelayFrom(now)
		r.CancelAt(now)
		return boundPod{}, &authError{status: http.StatusTooManyRequests, retry: wait,
			msg: "too many tokens to check right now; retry after the Retry-After seconds"}
	}
	st, err := t.review(ctx, token)
	if err != nil {
		t.metrics.reviewed("error")
		return boundPod{}, fmt.Errorf("reviewing the token: %w", err)
	}
	pod, err := podOf(st)
	var refused *authError
	switch {
	case errors.As(err, &refused):
		t.metrics.reviewed("refused")
		t.cache.Add(key, reviewed{err: err}, t.opts.NegativeTTL)
	case err == nil:
		t.metrics.reviewed("authenticated")
		if ttl := t.trustFor(token, now); ttl > 0 {
			t.cache.Add(key, reviewed{pod: pod}, ttl)
		}
	}
	return pod, err
}

// trustFor is how long a successful review of token may be reused: until
// the token's expiry, at most CacheTTL. The expiry is read from the JWT's
// claims without checking their signature; the review just proved the
// token, and a token whose expiry cannot be read is not remembered.
func (t *tokenReviews) trustFor(token string, now time.Time) time.Duration {
	exp, ok := expiry(token)
	if !ok {
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

// podOf checks a review's answer: a ServiceAccount token of Audience bound
// to a pod, and returns that pod.
func podOf(st authenticationv1.TokenReviewStatus) (boundPod, error) {
	if !st.Authenticated || !slices.Contains(st.Audiences, Audience) {
		return boundPod{}, unauthorized("the token is not valid for audience %s", Audience)
	}
	parts := strings.Split(st.User.Username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return boundPod{}, unauthorized("the token is not a ServiceAccount token")
	}
	name, uid := single(st.User.Extra[extraPodName]), single(st.User.Extra[extraPodUID])
	if name == "" || uid == "" {
		return boundPod{}, unauthorized("the token is not bound to a pod: use a projected ServiceAccount token")
	}
	return boundPod{Namespace: parts[2], Name: name, UID: types.UID(uid)}, nil
}

func single(v authenticationv1.ExtraValue) string {
	if len(v) != 1 {
		return ""
	}
	return v[0]
}
