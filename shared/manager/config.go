package manager

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Config holds the values an operator's command line sets. Reconcilers get
// it in Options.Setup so they can build their controllers from it.
type Config struct {
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS behind the API server's
	// authentication and authorization, as a cluster's scrapers expect; it
	// is switched off only for local runs without a cluster to ask.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint;
	// empty means a self-signed certificate, which scrapers that skip
	// verification accept.
	MetricsCertDir string
	// MetricsAuth bounds the TokenReviews the secure metrics endpoint makes.
	MetricsAuth MetricsAuth
	// EnableHTTP2 is off by default because HTTP/2 servers were open to the
	// rapid reset and stream cancellation attacks (CVE-2023-44487,
	// CVE-2023-39325), and metrics scrapers do not need it.
	EnableHTTP2 bool

	HealthProbeBindAddress string
	// PprofBindAddress serves Go's profiles (/debug/pprof) for measuring
	// where an operator spends its CPU; empty or "0" serves none, the
	// default, because profiles are for whoever can reach the port.
	PprofBindAddress string

	LeaderElect             bool
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	// RenewInterval is how often the leader writes its renewal; client-go's
	// elector renews every RetryPeriod, and the renewals in between are
	// kept in memory (see sparseRenewals). Zero writes every one, and so
	// does an interval too long for the lease (effectiveRenewInterval).
	RenewInterval time.Duration

	KubeAPIQPS   float64
	KubeAPIBurst int

	// MaxConcurrentReconciles is how many objects each controller
	// reconciles at once. One is controller-runtime's default; an operator
	// whose reconciles mostly wait on API round trips keeps up with bursts
	// of new objects only with more.
	MaxConcurrentReconciles int

	// MaxBackoff caps the per-object retry delay after failed reconciles.
	MaxBackoff time.Duration

	// PriorityQueue gives each controller controller-runtime's priority
	// workqueue: the objects a controller finds when it starts (after a
	// restart or a leader handover, every object in the cluster) and
	// changes that only re-deliver an unchanged object wait behind new
	// objects and real changes, instead of a new object waiting behind all
	// of them in one FIFO. On by default: at 20 000 TrainingJobs a job
	// created during the re-sync after a restart got its child within
	// 1.0 s (p99) instead of 8.8 s, for 21 % more CPU (34 s instead of
	// 28 s; controller-runtime v0.22's queue cost twice the FIFO's).
	PriorityQueue bool

	// WarmStandby starts each controller's watches in replicas that wait
	// for the leader lease, so that a new leader has its caches filled
	// when it takes over instead of listing every object then. Standbys
	// then hold as much memory as the leader.
	WarmStandby bool

	// MemoryLimit is the container's memory limit in bytes (the charts
	// pass it from the downward API); the Go runtime is asked to stay
	// within 90 % of it (see memoryLimitShare). Zero sets nothing, and so
	// does GOMEMLIMIT in the environment.
	MemoryLimit int64

	// GracefulShutdownTimeout bounds how long runnables get to stop after a
	// termination signal. It stays below a pod's default 30s termination
	// grace period, so that the leader lease is released and spans are
	// flushed before the kubelet kills the container.
	GracefulShutdownTimeout time.Duration

	Zap zap.Options

	// SkipControllerNameValidation lets several managers register
	// controllers of the same name in one process, as tests that start an
	// operator per test do. It is not a flag: a real operator runs one
	// manager.
	SkipControllerNameValidation bool

	// WatchNamespaces limits the caches of namespaced kinds to these
	// namespaces, for an install whose RBAC is Roles in those namespaces
	// only; empty means every namespace.
	WatchNamespaces []string

	// RESTConfig is the cluster to manage. It is not a flag: nil means the
	// --kubeconfig flag, the in-cluster config or ~/.kube/config, and tests
	// set it to their test API server.
	RESTConfig *rest.Config

	// apiServer is set by New before Options.Setup runs, for the rate
	// limiters of ControllerOptions.
	apiServer *apiServerHealth
}

// DefaultConfig returns the defaults of every flag.
func DefaultConfig() Config {
	return Config{
		MetricsBindAddress:      ":8443",
		MetricsSecure:           true,
		MetricsAuth:             defaultMetricsAuth(),
		HealthProbeBindAddress:  ":8081",
		LeaderElect:             true,
		LeaderElectionNamespace: defaultLeaderElectionNamespace(),
		// The leader writes its lease every RenewInterval: 24 writes a
		// minute, where a write per RetryPeriod of 1 s cost 60. A standby
		// reads the lease every 1 to 2.2 RetryPeriods (0.5 to 1.1 s) and
		// takes over LeaseDuration after it last saw the lease change: at
		// most LeaseDuration + 4.4 RetryPeriods = 9.2 s after the leader
		// crashed, and within 2.2 RetryPeriods (1.1 s) of a graceful
		// shutdown, which releases the lease. A leader that cannot write
		// for RenewDeadline (an API server outage) gives up and the process
		// exits, to be restarted by the kubelet; it has stopped leading
		// before a standby can take over, because LeaseDuration exceeds
		// RenewInterval + RetryPeriod + RenewDeadline (6 s) by a second.
		LeaseDuration: 7 * time.Second,
		RenewDeadline: 3 * time.Second,
		RetryPeriod:   500 * time.Millisecond,
		RenewInterval: 2500 * time.Millisecond,
		// client-go's own defaults (5 QPS, burst 10) throttle an operator
		// that lists and patches many children during a resync.
		KubeAPIQPS:              50,
		KubeAPIBurst:            100,
		MaxConcurrentReconciles: 1,
		// Five minutes rather than controller-runtime's 1000s, so that a
		// failing object is retried soon after an outage of its
		// dependency ends.
		MaxBackoff:              5 * time.Minute,
		PriorityQueue:           true,
		GracefulShutdownTimeout: 20 * time.Second,
		Zap: zap.Options{
			Development: false,
			TimeEncoder: zapcore.RFC3339NanoTimeEncoder,
		},
	}
}

// defaultLeaderElectionNamespace prefers the pod's namespace (set from the
// downward API by the charts) and falls back to "default" so that a run
// outside a cluster does not fail looking for the service account's
// namespace file.
func defaultLeaderElectionNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}

// BindFlags registers every flag on fs with c's current values as defaults,
// so that Parse fills c.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress,
		"The address the metrics endpoint binds to. Use \"0\" to disable it.")
	fs.BoolVar(&c.MetricsSecure, "metrics-secure", c.MetricsSecure,
		"Serve metrics over HTTPS, allowing only callers that the API server authorizes to get /metrics. Set to false for plain HTTP in local runs.")
	fs.StringVar(&c.MetricsCertDir, "metrics-cert-dir", c.MetricsCertDir,
		"A folder holding tls.crt and tls.key for the metrics endpoint. Empty means a self-signed certificate.")
	c.MetricsAuth.bindFlags(fs)
	fs.BoolVar(&c.EnableHTTP2, "enable-http2", c.EnableHTTP2,
		"Allow HTTP/2 on the metrics endpoint.")
	fs.StringVar(&c.PprofBindAddress, "pprof-bind-address", c.PprofBindAddress,
		"The address Go's profiles (/debug/pprof) bind to, for benchmarks; empty or \"0\" serves none.")
	fs.StringVar(&c.HealthProbeBindAddress, "health-probe-bind-address", c.HealthProbeBindAddress,
		"The address the /healthz and /readyz endpoints bind to. Use \"0\" to disable them.")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect,
		"Run reconcilers only in the replica that holds the leader lease.")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", c.LeaderElectionNamespace,
		"The namespace of the leader election lease. Defaults to $POD_NAMESPACE, else \"default\".")
	fs.DurationVar(&c.LeaseDuration, "leader-election-lease-duration", c.LeaseDuration,
		"How long other replicas wait before taking over a lease that was not renewed.")
	fs.DurationVar(&c.RenewDeadline, "leader-election-renew-deadline", c.RenewDeadline,
		"How long the leader keeps trying to renew its lease before it gives up leadership.")
	fs.DurationVar(&c.RetryPeriod, "leader-election-retry-period", c.RetryPeriod,
		"How often replicas try to acquire or renew the lease.")
	fs.DurationVar(&c.RenewInterval, "leader-election-renew-interval", c.RenewInterval,
		"How often the leader writes its lease renewal (it renews in memory every retry period). An interval of 0, or one not below lease duration - renew deadline - retry period, writes every renewal.")
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", c.KubeAPIQPS,
		"Sustained queries per second to the Kubernetes API.")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", c.KubeAPIBurst,
		"Burst of queries to the Kubernetes API above --kube-api-qps.")
	fs.IntVar(&c.MaxConcurrentReconciles, "max-concurrent-reconciles", c.MaxConcurrentReconciles,
		"How many objects each controller reconciles at once.")
	fs.DurationVar(&c.MaxBackoff, "max-backoff", c.MaxBackoff,
		"The longest delay before an object whose reconcile failed is retried.")
	fs.BoolVar(&c.PriorityQueue, "priority-queue", c.PriorityQueue,
		"Reconcile new objects and changes before the objects every controller re-reads when it starts (after a restart or a leader handover).")
	fs.BoolVar(&c.WarmStandby, "warm-standby", c.WarmStandby,
		"Fill the caches of replicas that are not the leader, so that a new leader acts at once after a handover; standbys then use as much memory as the leader.")
	fs.Func("memory-limit",
		"The container's memory limit (a quantity such as 512Mi, or bytes); the Go runtime keeps its memory within 90% of it, collecting garbage more often near it. Empty or 0 sets none; GOMEMLIMIT wins.",
		func(v string) (err error) {
			c.MemoryLimit, err = parseMemoryLimit(v)
			return err
		})
	fs.DurationVar(&c.GracefulShutdownTimeout, "graceful-shutdown-timeout", c.GracefulShutdownTimeout,
		"How long reconcilers and servers get to stop after a termination signal.")
	fs.Func("watch-namespaces",
		"Comma-separated namespaces the operator watches and works in; empty means every namespace. Cluster-scoped kinds are watched regardless.",
		func(v string) error {
			c.WatchNamespaces = nil
			for _, ns := range strings.Split(v, ",") {
				if ns = strings.TrimSpace(ns); ns != "" {
					c.WatchNamespaces = append(c.WatchNamespaces, ns)
				}
			}
			return nil
		})
	c.Zap.BindFlags(fs)
}

// CacheNamespaces returns the cache configuration WatchNamespaces asks for,
// for caches an operator builds besides the manager's; nil means every
// namespace.
func (c Config) CacheNamespaces() map[string]cache.Config {
	if len(c.WatchNamespaces) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(c.WatchNamespaces))
	for _, ns := range c.WatchNamespaces {
		out[ns] = cache.Config{}
	}
	return out
}

// Validate reports flag combinations that would only fail later, such as
// lease timings that client-go's leader elector rejects once the manager
// has already started its servers.
func (c Config) Validate() error {
	var errs []error
	if c.LeaderElect {
		// These are the same relations client-go's leader elector checks,
		// including its jitter factor of 1.2 on the retry period.
		if c.LeaseDuration <= c.RenewDeadline {
			errs = append(errs, fmt.Errorf("--leader-election-lease-duration (%v) must be greater than --leader-election-renew-deadline (%v)", c.LeaseDuration, c.RenewDeadline))
		}
		if float64(c.RenewDeadline) <= 1.2*float64(c.RetryPeriod) {
			errs = append(errs, fmt.Errorf("--leader-election-renew-deadline (%v) must be greater than 1.2 x --leader-election-retry-period (%v)", c.RenewDeadline, c.RetryPeriod))
		}
		if c.RenewInterval < 0 {
			errs = append(errs, fmt.Errorf("--leader-election-renew-interval (%v) must not be negative", c.RenewInterval))
		}
		if c.LeaderElectionNamespace == "" {
			errs = append(errs, errors.New("--leader-election-namespace must not be empty"))
		}
	}
	if c.KubeAPIQPS <= 0 || c.KubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps (%v) and --kube-api-burst (%v) must be positive", c.KubeAPIQPS, c.KubeAPIBurst))
	}
	for _, ns := range c.WatchNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--watch-namespaces: %q: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	if c.MaxConcurrentReconciles <= 0 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles (%v) must be positive", c.MaxConcurrentReconciles))
	}
	if c.MaxBackoff <= 0 {
		errs = append(errs, fmt.Errorf("--max-backoff (%v) must be positive", c.MaxBackoff))
	}
	if c.MetricsSecure {
		errs = append(errs, c.MetricsAuth.validate())
	}
	return errors.Join(errs...)
}

// ControllerOptions returns controller options with MaxConcurrentReconciles
// workers and a workqueue that backs off up to MaxBackoff, and retries about
// every second without backing off while the API server is unreachable (in
// the Config that Options.Setup gets). Call it once per controller: the rate
// limiter remembers each object's failures, so controllers must not share one.
func (c Config) ControllerOptions() controller.Options {
	limiter := NewRateLimiter[reconcile.Request](c.MaxBackoff)
	if c.apiServer != nil {
		limiter = &outageAwareRateLimiter[reconcile.Request]{TypedRateLimiter: limiter, health: c.apiServer}
	}
	return controller.Options{MaxConcurrentReconciles: c.MaxConcurrentReconciles, RateLimiter: limiter}
}

// NewRateLimiter is controller-runtime's default workqueue rate limiter with
// maxBackoff instead of its fixed 1000s cap: per-object exponential backoff
// from 5ms, and an overall 10 per second (burst 100) bucket so that a mass
// failure does not hammer the API server.
func NewRateLimiter[T comparable](maxBackoff time.Duration) workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, maxBackoff),
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// effectiveRenewInterval is RenewInterval when it fits the lease, else 0
// (every renewal written, client-go's own behaviour). A leader whose last
// write was sent at t believes it leads until its first failed write, at
// t + RenewInterval + RetryPeriod at the latest, plus RenewDeadline; a
// standby, which cannot see the write before it was sent, takes over from
// t + LeaseDuration on at the earliest, so the sum must stay below
// LeaseDuration. Timings chosen before the renew interval existed (6 s,
// 4 s and 1 s, say) leave no room for it; they keep working as they did
// rather than stop the operator from starting after an upgrade.
func (c Config) effectiveRenewInterval() time.Duration {
	if c.RenewInterval <= 0 || c.RenewInterval+c.RetryPeriod+c.RenewDeadline >= c.LeaseDuration {
		return 0
	}
	return c.RenewInterval
}
