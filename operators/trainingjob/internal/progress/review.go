package progress

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/shared/tokenbudget"
)

// ReviewOptions bound what reviewing tokens may cost: the budget of
// TokenReviews and the cache of their answers.
type ReviewOptions = tokenbudget.Options

// TokenReviewer creates TokenReviews for Audience with c, which should be
// a client of its own (reviewClient) so the reviews never spend the
// reconcilers' budget of API requests.
func TokenReviewer(c client.Client) tokenbudget.ReviewFunc {
	return tokenbudget.TokenReviewer(c, Audience)
}

// tokenReviews finds the pod a token is bound to within the endpoint's
// budget of TokenReviews, remembering the answers.
type tokenReviews struct {
	reviews *tokenbudget.Reviews[boundPod]
}

func newTokenReviews(review tokenbudget.ReviewFunc, o ReviewOptions, now func() time.Time, m *endpointMetrics) *tokenReviews {
	return &tokenReviews{reviews: tokenbudget.NewReviews(review, podOf, o, now, reviewMetrics{m})}
}

// boundPod returns the pod token is bound to; a review the budget has no
// room for is refused with 429 and the time until it has.
func (t *tokenReviews) boundPod(ctx context.Context, token string) (boundPod, error) {
	pod, err := t.reviews.Review(ctx, token)
	var throttled *tokenbudget.Throttled
	if errors.As(err, &throttled) {
		return boundPod{}, &authError{status: http.StatusTooManyRequests, retry: throttled.Wait,
			msg: "too many tokens to check right now; retry after the Retry-After seconds"}
	}
	return pod, err
}

// reviewMetrics counts the reviews in the endpoint's metrics.
type reviewMetrics struct{ m *endpointMetrics }

func (r reviewMetrics) CacheHit(authenticated bool) { r.m.cacheHit(authenticated) }
func (r reviewMetrics) Throttled()                  { r.m.throttled("tokenreview") }
func (r reviewMetrics) Reviewed(result string)      { r.m.reviewed(result) }

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
