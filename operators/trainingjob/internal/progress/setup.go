package progress

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Options configure the endpoint; the chart sets them.
type Options struct {
	// BindAddress of the HTTPS endpoint; empty or "0" switches it off.
	BindAddress string
	// CertDir holds tls.crt, tls.key and ca.crt of the endpoint.
	CertDir string
	// URL is the endpoint as training pods reach it, through the
	// operator's Service: https://<service>.<namespace>.svc:<port>.
	URL string
	// Interval is the least time between two writes of one job's
	// status.progress.
	Interval time.Duration
	// Rate and Burst are each job's token bucket of reports.
	Rate  float64
	Burst int
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
	return Options{BindAddress: "0", Interval: 10 * time.Second, Rate: 1, Burst: 5}
}

// BindFlags binds o to fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.BindAddress, "progress-bind-address", o.BindAddress, "Address of the HTTPS endpoint training pods report progress to; \"0\" switches it off.")
	fs.StringVar(&o.CertDir, "progress-cert-dir", o.CertDir, "Folder with tls.crt, tls.key and ca.crt of the progress endpoint.")
	fs.StringVar(&o.URL, "progress-url", o.URL, "The progress endpoint as training pods reach it, e.g. https://<service>.<namespace>.svc:9443.")
	fs.DurationVar(&o.Interval, "progress-interval", o.Interval, "Least time between two writes of a TrainingJob's status.progress.")
	fs.Float64Var(&o.Rate, "progress-rate", o.Rate, "Progress reports each TrainingJob may send per second, sustained.")
	fs.IntVar(&o.Burst, "progress-burst", o.Burst, "Progress reports each TrainingJob may send at once above --progress-rate.")
	fs.BoolVar(&o.AllRanks, "progress-all-ranks", o.AllRanks, "Accept progress from every pod of a TrainingJob, not only rank 0.")
	fs.StringVar(&o.AdvertiseAddress, "progress-advertise-address", o.AdvertiseAddress, "host:port at which other replicas reach this one's progress endpoint.")
	fs.StringVar(&o.Namespace, "progress-namespace", o.Namespace, "Namespace of the Lease that names the leading replica's progress address.")
}

// Enabled says whether the endpoint runs.
func (o Options) Enabled() bool { return o.BindAddress != "" && o.BindAddress != "0" }

func (o Options) validate() error {
	switch {
	case o.CertDir == "":
		return errors.New("--progress-cert-dir is required with --progress-bind-address")
	case o.Interval <= 0:
		return errors.New("--progress-interval must be positive")
	case o.Rate <= 0 || o.Burst < 1:
		return errors.New("--progress-rate must be positive and --progress-burst at least 1")
	case o.Namespace != "" && (o.AdvertiseAddress == "" || serverName(o.URL) == ""):
		return errors.New("--progress-advertise-address and --progress-url are required with --progress-namespace")
	}
	return nil
}

// The endpoint reviews tokens, reads pods, their jobs and TrainingJobs
// (the reconciler's rules cover those) and writes status.progress.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=training.mlplatform.dev,resources=trainingjobs/status,verbs=get;patch

// Setup adds the endpoint to mgr: the HTTPS server on every replica, the
// status writer and the leader's address record on the leader only. name
// is the operator's name, for the Lease.
func Setup(mgr ctrl.Manager, name string, o Options) error {
	if !o.Enabled() {
		return nil
	}
	if err := o.validate(); err != nil {
		return err
	}
	certs, err := certwatcher.New(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("progress endpoint certificate: %w", err)
	}
	log := mgr.GetLogger().WithName("progress")
	writer := &Writer{Client: mgr.GetClient(), Reader: mgr.GetClient(), Interval: o.Interval, Log: log}
	h := &Handler{
		Auth:    &Authorizer{Client: mgr.GetClient(), Reader: mgr.GetClient(), Scheme: mgr.GetScheme(), AllRanks: o.AllRanks},
		Writer:  writer,
		Limits:  newLimiters(o.Rate, o.Burst),
		Leading: leading(mgr.Elected()),
		Log:     log,
	}
	runnables := []manager.Runnable{certs, writer, &server{addr: o.BindAddress, handler: h.Mux(), certs: certs, log: log}}
	if o.Namespace != "" {
		record := &leaderRecord{
			key:  types.NamespacedName{Namespace: o.Namespace, Name: name + "-progress.mlplatform.dev"},
			self: o.AdvertiseAddress, client: mgr.GetClient(), live: mgr.GetAPIReader(), maxAged: 5 * time.Second,
		}
		fwd, err := newForwarder(record, filepath.Join(o.CertDir, "ca.crt"), serverName(o.URL))
		if err != nil {
			return err
		}
		h.Forward = fwd.forward
		runnables = append(runnables, record)
	}
	for _, r := range runnables {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	return nil
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

// serverName is the host of the endpoint's URL: the name on its
// certificate, which replicas verify when they pass reports on.
func serverName(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
