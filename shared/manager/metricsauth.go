package manager

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ml-platform/ml-platform/shared/tokenbudget"
)

// MetricsAuth bounds what authenticating callers of the secure metrics
// endpoint costs. Anyone the metrics NetworkPolicy admits (any pod a
// tenant labels like the scraper) can send tokens; each unknown one costs
// a TokenReview. The reviews are limited per source address and for the
// whole endpoint, and use a client of their own, so a flood of garbage
// tokens costs at most that budget and never the reconcilers' API
// requests; beyond it a request gets 429 at once, with no review.
type MetricsAuth struct {
	// Reviews is the budget of TokenReviews for the whole endpoint and the
	// cache of their answers, by the token's SHA-256.
	Reviews tokenbudget.Options
	// SourceRate and SourceBurst are each source address's bucket of
	// TokenReviews; a token answered from the cache takes none, so a
	// scraper whose token is known is served whatever the flood.
	SourceRate  float64
	SourceBurst int
	// MaxSources bounds how many addresses are tracked at once.
	MaxSources int
}

// defaultMetricsAuth: a scraper or two per replica need a review only when
// their token is new (at most every CacheTTL); the TTLs are those of
// controller-runtime's filter for a success and of the API server's token
// webhook for a refusal.
func defaultMetricsAuth() MetricsAuth {
	return MetricsAuth{
		Reviews: tokenbudget.Options{
			Rate: 2, Burst: 10, CacheTTL: time.Minute, NegativeTTL: 10 * time.Second, CacheSize: 1000,
			// A scraper's token from a ServiceAccount token Secret never
			// expires; controller-runtime trusted it for CacheTTL too.
			CacheWithoutExpiry: true,
		},
		SourceRate: 0.2, SourceBurst: 5, MaxSources: 10000,
	}
}

func (m *MetricsAuth) bindFlags(fs *flag.FlagSet) {
	fs.Float64Var(&m.Reviews.Rate, "metrics-tokenreview-qps", m.Reviews.Rate, "TokenReviews per second the secure metrics endpoint may make, with a client of its own; requests that need one beyond get 429 at once.")
	fs.IntVar(&m.Reviews.Burst, "metrics-tokenreview-burst", m.Reviews.Burst, "TokenReviews the metrics endpoint may make at once above --metrics-tokenreview-qps.")
	fs.DurationVar(&m.Reviews.CacheTTL, "metrics-token-cache-ttl", m.Reviews.CacheTTL, "Longest a successful TokenReview of a metrics scraper is reused.")
	fs.DurationVar(&m.Reviews.NegativeTTL, "metrics-token-negative-cache-ttl", m.Reviews.NegativeTTL, "How long a refused metrics token is refused without a new TokenReview.")
	fs.IntVar(&m.Reviews.CacheSize, "metrics-token-cache-size", m.Reviews.CacheSize, "Most TokenReview answers of the metrics endpoint remembered, by the token's SHA-256.")
	fs.Float64Var(&m.SourceRate, "metrics-source-tokenreview-rate", m.SourceRate, "TokenReviews per second each source address of the metrics endpoint may cause, sustained; a cached token causes none.")
	fs.IntVar(&m.SourceBurst, "metrics-source-tokenreview-burst", m.SourceBurst, "TokenReviews each source address may cause at once above --metrics-source-tokenreview-rate.")
	fs.IntVar(&m.MaxSources, "metrics-max-sources", m.MaxSources, "Source addresses of the metrics endpoint tracked at once; beyond, the least recently seen is forgotten.")
}

func (m MetricsAuth) validate() error {
	if m.Reviews.Rate <= 0 || m.Reviews.Burst < 1 || m.SourceRate <= 0 || m.SourceBurst < 1 || m.MaxSources < 1 ||
		m.Reviews.CacheTTL < 0 || m.Reviews.NegativeTTL < 0 || m.Reviews.CacheSize < 1 {
		return errors.New("--metrics-tokenreview-qps and --metrics-source-tokenreview-rate must be positive, their bursts, --metrics-max-sources and --metrics-token-cache-size at least 1, the cache TTLs not negative")
	}
	return nil
}

// authErrorInterval is the least time between two log lines about
// failed authentications or authorizations of metrics requests.
const authErrorInterval = time.Minute

// filterProvider authenticates a metrics request's bearer token by a
// TokenReview within o's budget, then authorizes get on its path by a
// SubjectAccessReview as controller-runtime's filter does (cached; only
// for a caller the API server authenticated).
func (m MetricsAuth) filterProvider() func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
		reviewer, err := tokenReviewClient(config, m.Reviews)
		if err != nil {
			return nil, err
		}
		sar, err := authorizationv1.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return nil, err
		}
		authz, err := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: sar,
			AllowCacheTTL:             5 * time.Minute,
			DenyCacheTTL:              30 * time.Second,
			WebhookRetryBackoff:       &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
		}.New()
		if err != nil {
			return nil, fmt.Errorf("metrics authorizer: %w", err)
		}
		return func(log logr.Logger, next http.Handler) (http.Handler, error) {
			return &metricsGuard{
				reviews: tokenbudget.NewReviews(tokenbudget.TokenReviewer(reviewer), userOf, m.Reviews, nil, nil),
				sources: tokenbudget.NewLimiter[string](m.SourceRate, m.SourceBurst, m.MaxSources, nil),
				authz:   authz,
				errors:  &sampledErrors{log: log, interval: authErrorInterval},
				next:    next,
			}, nil
		}, nil
	}
}

// tokenReviewClient is a client for TokenReviews alone, on a copy of the
// manager's configuration with its own rate limiter (it only smooths; the
// budget refuses at once) and a fixed mapping, so it makes no discovery
// requests either.
func tokenReviewClient(config *rest.Config, o tokenbudget.Options) (client.Client, error) {
	cfg := rest.CopyConfig(config)
	cfg.RateLimiter = nil
	cfg.QPS, cfg.Burst = float32(o.Rate), o.Burst
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(authenticationv1.SchemeGroupVersion.WithKind("TokenReview"), meta.RESTScopeRoot)
	c, err := client.New(cfg, client.Options{Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: the TokenReview client: %w", err)
	}
	return c, nil
}

// errUnauthenticated is a refusal of the API server, remembered for the
// negative TTL.
var errUnauthenticated = errors.New("the token is not valid")

// userOf is the user an authenticated token belongs to.
func userOf(st authenticationv1.TokenReviewStatus) (user.Info, error) {
	if !st.Authenticated {
		return nil, errUnauthenticated
	}
	extra := make(map[string][]string, len(st.User.Extra))
	for k, v := range st.User.Extra {
		extra[k] = v
	}
	return &user.DefaultInfo{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Extra: extra}, nil
}

// metricsGuard serves a request only to a caller the API server
// authenticates and authorizes to get its path.
type metricsGuard struct {
	reviews *tokenbudget.Reviews[user.Info]
	sources *tokenbudget.Limiter[string]
	authz   authorizer.Authorizer
	errors  *sampledErrors
	next    http.Handler
}

func (g *metricsGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := bearerToken(r)
	if !ok {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	who, err := g.authenticate(r, token)
	var throttled *tokenbudget.Throttled
	switch {
	case errors.As(err, &throttled):
		w.Header().Set("Retry-After", strconv.Itoa(tokenbudget.RetryAfter(throttled.Wait)))
		http.Error(w, "Too many tokens to check right now", http.StatusTooManyRequests)
		return
	case errors.Is(err, errUnauthenticated):
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	case err != nil:
		g.errors.report(err, "Authenticating a metrics request failed")
		http.Error(w, "Authentication failed", http.StatusInternalServerError)
		return
	}
	attrs := authorizer.AttributesRecord{User: who, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
	decision, _, err := g.authz.Authorize(r.Context(), attrs)
	switch {
	case err != nil:
		g.errors.report(err, "Authorizing a metrics request failed", "user", who.GetName())
		http.Error(w, "Authorization for user "+who.GetName()+" failed", http.StatusInternalServerError)
	case decision != authorizer.DecisionAllow:
		http.Error(w, "Authorization denied for user "+who.GetName(), http.StatusForbidden)
	default:
		g.next.ServeHTTP(w, r)
	}
}

// authenticate answers a known token from the cache; an unknown one takes
// a review from its source's bucket, then from the endpoint's budget.
func (g *metricsGuard) authenticate(r *http.Request, token string) (user.Info, error) {
	if who, err := g.reviews.Cached(token); !errors.Is(err, tokenbudget.ErrNotCached) {
		return who, err
	}
	if ok, wait := g.sources.Allow(tokenbudget.Source(r)); !ok {
		return nil, &tokenbudget.Throttled{Wait: wait}
	}
	return g.reviews.Review(r.Context(), token)
}

// bearerToken is the request's bearer token.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}

// sampledErrors writes at most one error line per interval, with how many
// errors it left out, so that callers who can make requests fail cannot
// flood the log.
type sampledErrors struct {
	log      logr.Logger
	interval time.Duration

	mu      sync.Mutex
	written time.Time
	skipped int
}

func (s *sampledErrors) report(err error, msg string, kv ...any) {
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.written) < s.interval {
		s.skipped++
		s.mu.Unlock()
		return
	}
	skipped := s.skipped
	s.written, s.skipped = now, 0
	s.mu.Unlock()
	s.log.Error(err, msg, append(kv, "sameErrorsNotLogged", skipped, "interval", s.interval.String())...)
}
