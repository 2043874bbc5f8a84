package tokenbudget

import (
	"context"
	"errors"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// countedReviews authenticates every token as its own user and counts the
// reviews.
func countedReviews(o Options) (*Reviews[string], *int) {
	var n int
	review := func(_ context.Context, token string) (authenticationv1.TokenReviewStatus, error) {
		n++
		return authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: token}}, nil
	}
	check := func(st authenticationv1.TokenReviewStatus) (string, error) { return st.User.Username, nil }
	return NewReviews(review, check, o, newFakeClock().Now, nil), &n
}

// A token that is not a JWT with an expiry (a ServiceAccount token
// Secret's never expires) is remembered only with CacheWithoutExpiry.
func TestTokensWithoutExpiryAreRememberedOnlyWhenAsked(t *testing.T) {
	for _, remember := range []bool{false, true} {
		r, reviews := countedReviews(Options{Rate: 100, Burst: 100, CacheTTL: time.Minute, CacheSize: 10, CacheWithoutExpiry: remember})
		if _, err := r.Cached("legacy"); !errors.Is(err, ErrNotCached) {
			t.Fatalf("an unknown token is cached: %v", err)
		}
		if *reviews != 0 {
			t.Fatal("Cached made a review")
		}
		for range 3 {
			if who, err := r.Review(t.Context(), "legacy"); err != nil || who != "legacy" {
				t.Fatalf("Review = %q, %v", who, err)
			}
		}
		want := 3
		if remember {
			want = 1
		}
		if *reviews != want {
			t.Errorf("CacheWithoutExpiry=%t: %d reviews of one token, want %d", remember, *reviews, want)
		}
		if _, err := r.Cached("legacy"); errors.Is(err, ErrNotCached) == remember {
			t.Errorf("CacheWithoutExpiry=%t: Cached after a review: %v", remember, err)
		}
	}
}
