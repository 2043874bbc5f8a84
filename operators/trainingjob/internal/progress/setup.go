package progress

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/ml-platform/ml-platform/shared/tokenbudget"
)

// Options configure the endpoint; the chart sets them.
type Options struct {
	// BindAddress of the HTTPS endpoint; empty or "0" switches it off.
	BindAddress string
	// Secret is the namespace/name of the kubernetes.io/tls Secret with
	// tls.crt, tls.key and ca.crt of the endpoint.
	Secret string
	// GenerateSecret lets the operator create the Secret when it is
	// missing and replace it when unusable; false only reads it.
	GenerateSecret bool
	// SecretReload is how often every replica reads the Secret again, so
	// that a rotated CA or certificate reaches new pods, the served
	// certificate and the forwarder within about that time.
	SecretReload time.Duration
	// URL is the endpoint as training pods reach it, through the
	// operator's Service: https://<service>.<namespace>.svc:<port>.
	URL string
	// Interval is the least time between two writes of one job's
	// status.progress.
	Interval time.Duration
	// Rate and Burst are each job's token bucket of reports.
	Rate  float64
	Burst int
	// SourceRate and SourceBurst are each source address's token bucket
	// of requests, taken before the token is reviewed; MaxSources bounds
	// how many addresses are tracked (the least recently seen goes).
	SourceRate  float64
	SourceBurst int
	MaxSources  int
	// Reviews bound the TokenReviews: their own client and budget, and
	// the cache of their answers.
	Reviews ReviewOptions
	// AllRanks lets every pod of a job report, not only rank 0.
	AllRanks bool
	// AdvertiseAddress is host:port at which the other replicas reach this
	// one, to pass reports on when it leads.
	AdvertiseAddress string
	// Namespace holds the Lease naming the leader's address; empty means
	// a single replica that never passes reports on.
	Namespace string
}

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{
		BindAddress: "0", GenerateSecret: true, SecretReload: time.Minute, Interval: 10 * time.Second, Rate: 1, Burst: 5,
		SourceRate: 2, SourceBurst: 10, MaxSources: 10000,
		// The TTLs are the API server's own defaults for webhook token
		// authentication (2 min successful, 10 s refused).
		Reviews: ReviewOptions{Rate: 20, Burst: 40, CacheTTL: 2 * time.Minute, NegativeTTL: 10 * time.Second, CacheSize: 10000},
	}
}

// BindFlags binds o to fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.BindAddress, "progress-bind-address", o.BindAddress, "Address of the HTTPS endpoint training pods report progress to; \"0\" switches it off.")
	fs.StringVar(&o.Secret, "progress-secret", o.Secret, "namespace/name of the kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt of the progress endpoint.")
	fs.BoolVar(&o.GenerateSecret, "progress-secret-generate", o.GenerateSecret, "Create --progress-secret with a new CA and certificate when it is missing, and replace it when unusable; false only reads it.")
	fs.DurationVar(&o.SecretReload, "progress-secret-reload-interval", o.SecretReload, "How often every replica reads --progress-secret again, to follow a rotated CA or certificate.")
	fs.StringVar(&o.URL, "progress-url", o.URL, "The progress endpoint as training pods reach it, e.g. https://<service>.<namespace>.svc:9443.")
	fs.DurationVar(&o.Interval, "progress-interval", o.Interval, "Least time between two writes of a TrainingJob's status.progress.")
	fs.Float64Var(&o.Rate, "progress-rate", o.Rate, "Progress reports each TrainingJob may send per second, sustained.")
	fs.IntVar(&o.Burst, "progress-burst", o.Burst, "Progress reports each TrainingJob may send at once above --progress-rate.")
	fs.Float64Var(&o.SourceRate, "progress-source-rate", o.SourceRate, "Requests each source address may send per second, sustained; checked before the token is reviewed.")
	fs.IntVar(&o.SourceBurst, "progress-source-burst", o.SourceBurst, "Requests each source address may send at once above --progress-source-rate.")
	fs.IntVar(&o.MaxSources, "progress-max-sources", o.MaxSources, "Source addresses whose rate is tracked at once; beyond, the least recently seen is forgotten.")
	fs.Float64Var(&o.Reviews.Rate, "progress-tokenreview-qps", o.Reviews.Rate, "TokenReviews per second the endpoint may make, with a client of its own; requests beyond get 429 at once.")
	fs.IntVar(&o.Reviews.Burst, "progress-tokenreview-burst", o.Reviews.Burst, "TokenReviews the endpoint may make at once above --progress-tokenreview-qps.")
	fs.DurationVar(&o.Reviews.CacheTTL, "progress-token-cache-ttl", o.Reviews.CacheTTL, "Longest a successful TokenReview is reused; never past the token's expiry.")
	fs.DurationVar(&o.Reviews.NegativeTTL, "progress-token-negative-cache-ttl", o.Reviews.NegativeTTL, "How long a refused token is refused without a new TokenReview; 0 asks every time.")
	fs.IntVar(&o.Reviews.CacheSize, "progress-token-cache-size", o.Reviews.CacheSize, "Most TokenReview answers remembered, by the token's SHA-256.")
	fs.BoolVar(&o.AllRanks, "progress-all-ranks", o.AllRanks, "Accept progress from every pod of a TrainingJob, not only rank 0.")
	fs.StringVar(&o.AdvertiseAddress, "progress-advertise-address", o.AdvertiseAddress, "host:port at which other replicas reach this one's progress endpoint.")
	fs.StringVar(&o.Namespace, "progress-namespace", o.Namespace, "Namespace of the Lease that names the leading replica's progress address.")
}

// Enabled says whether the endpoint runs.
func (o Options) Enabled() bool { return o.BindAddress != "" && o.BindAddress != "0" }

func (o Options) validate() error {
	switch {
	case o.URL == "":
		return errors.New("--progress-url is required with --progress-bind-address")
	case !validKey(o.Secret):
		return errors.New("--progress-secret=<namespace>/<name> is required with --progress-bind-address")
	case o.SecretReload <= 0:
		return errors.New("--progress-secret-reload-interval must be positive")
	case o.Interval <= 0:
		return errors.New("--progress-interval must be positive")
	case o.Rate <= 0 || o.Burst < 1:
		return errors.New("--progress-rate must be positive and --progress-burst at least 1")
	case o.SourceRate <= 0 || o.SourceBurst < 1 || o.MaxSources < 1:
		return errors.New("--progress-source-rate must be positive, --progress-source-burst and --progress-max-sources at least 1")
	case o.Reviews.Rate <= 0 || o.Reviews.Burst < 1:
		return errors.New("--progress-tokenreview-qps must be positive and --progress-tokenreview-burst at least 1")
	case o.Reviews.CacheTTL < 0 || o.Reviews.NegativeTTL < 0 || o.Reviews.CacheSize < 1:
		return errors.New("--progress-token-cache-ttl and --progress-token-negative-cache-ttl must not be negative, --progress-token-cache-size at least 1")
	case o.Namespace != "" && (o.AdvertiseAddress == "" || serverName(o.URL) == ""):
		return errors.New("--progress-advertise-address and --progress-url are required with --progress-namespace")
	}
	return nil
}

// The endpoint reviews tokens, reads pods, their jobs and TrainingJobs
// (the reconciler's rules cover those) and writes status.progress. Its
// Secret is read, created and updated under a Role of the operator's
// namespace that the chart grants (templates/progress.yaml), not under
// the cluster-wide rules generated from these markers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=training.mlplatform.dev,resources=trainingjobs/status,verbs=get;patch

// Setup adds the endpoint to mgr: the HTTPS server and the reload of its
// Secret on every replica, the status writer and the leader's address
// record on the leader only. name is the operator's name, for the Lease.
// It loads the Secret (creating it when the operator owns it) before it
// returns, and returns what training pods need to report, which follows
// the Secret's CA; nil when the endpoint is off.
func Setup(mgr ctrl.Manager, name string, o Options) (*Endpoint, error) {
	if !o.Enabled() {
		return nil, nil
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	log := mgr.GetLogger().WithName("progress")
	certs, err := loadCertificates(mgr, name, o, log)
	if err != nil {
		return nil, err
	}
	reviewer, err := reviewClient(mgr, o.Reviews)
	if err != nil {
		return nil, err
	}
	m := newEndpointMetrics()
	writer := &Writer{Client: mgr.GetClient(), Reader: mgr.GetClient(), Interval: o.Interval, Log: log}
	h := &Handler{
		Auth: &Authorizer{
			Reviews: newTokenReviews(TokenReviewer(reviewer), o.Reviews, nil, m),
			Reader:  mgr.GetClient(), Scheme: mgr.GetScheme(), AllRanks: o.AllRanks,
		},
		Writer:      writer,
		Limits:      tokenbudget.NewLimiter[types.UID](o.Rate, o.Burst, maxJobs, nil),
		Sources:     tokenbudget.NewLimiter[string](o.SourceRate, o.SourceBurst, o.MaxSources, nil),
		FromReplica: replicaCheck(certs),
		Leading:     leading(mgr.Elected()),
		Log:         log,
		Metrics:     m,
	}
	errs := &connectionErrors{log: log, interval: connectionErrorInterval, metrics: m}
	runnables := []manager.Runnable{certs, writer, &server{addr: o.BindAddress, handler: h.Mux(), certs: certs, log: log, errors: errs}}
	if o.Namespace != "" {
		record := &leaderRecord{
			key:  types.NamespacedName{Namespace: o.Namespace, Name: name + "-progress.mlplatform.dev"},
			self: o.AdvertiseAddress, client: mgr.GetClient(), live: mgr.GetAPIReader(), maxAged: 5 * time.Second, log: log,
		}
		h.Forward = (&forwarder{leader: record, certs: certs, serverName: serverName(o.URL)}).forward
		runnables = append(runnables, record)
	}
	for _, r := range runnables {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	return &Endpoint{URL: strings.TrimSuffix(o.URL, "/"), CA: certs.CA}, nil
}

// secretLoadTimeout bounds the first read (or creation) of the Secret;
// beyond it the operator exits with the error and is restarted.
const secretLoadTimeout = time.Minute

// loadCertificates reads the endpoint's Secret for the first time, so that
// no pod is built and no request served before its CA is known.
func loadCertificates(mgr ctrl.Manager, operator string, o Options, log logr.Logger) (*certificates, error) {
	namespace, name, _ := strings.Cut(o.Secret, "/")
	certs := &certificates{
		key:      types.NamespacedName{Namespace: namespace, Name: name},
		names:    certificateNames(serverName(o.URL)),
		generate: o.GenerateSecret,
		operator: operator,
		client:   mgr.GetClient(), reader: mgr.GetAPIReader(),
		interval: o.SecretReload,
		log:      log,
	}
	ctx, cancel := context.WithTimeout(context.Background(), secretLoadTimeout)
	defer cancel()
	if err := certs.load(ctx); err != nil {
		return nil, err
	}
	return certs, nil
}

// maxJobs bounds the TrainingJobs whose report buckets are kept; only
// authorized callers add one, so it is far above any real cluster.
const maxJobs = 100000

// reviewClient is a client for TokenReviews alone, on a copy of the
// manager's configuration with its own rate limiter, so reviews never
// spend the reconcilers' budget of API requests. Its limiter only
// smooths: the endpoint's own budget (ReviewOptions) refuses at once what
// would otherwise queue.
func reviewClient(mgr ctrl.Manager, o ReviewOptions) (client.Client, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.RateLimiter = nil
	cfg.QPS, cfg.Burst = float32(o.Rate), o.Burst
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("progress endpoint: the TokenReview client: %w", err)
	}
	return c, nil
}

// leading reports whether elected is closed: this replica leads (or runs
// without leader election).
func leading(elected <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-elected:
			return true
		default:
			return false
		}
	}
}

// validKey says whether key is <namespace>/<name>.
func validKey(key string) bool {
	namespace, name, ok := strings.Cut(key, "/")
	return ok && namespace != "" && name != "" && !strings.Contains(name, "/")
}

// serverName is the host of the endpoint's URL: the name on its
// certificate, which replicas verify when they pass reports on.
func serverName(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
