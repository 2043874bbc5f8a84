package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
)

// Config is the admin configuration. Every field has a default, so an
// empty file is a valid configuration.
type Config struct {
	// DefaultImage runs when a Notebook names no image.
	DefaultImage string `json:"defaultImage"`
	// ImagePullPolicy of the Jupyter container.
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy"`
	// UID the Jupyter server runs as (1000 is jovyan in the Jupyter images).
	UID int64 `json:"uid"`
	// ClusterDomain forms the in-cluster URL.
	ClusterDomain string `json:"clusterDomain"`
	// ReportInterval bounds how often status.lastActivity is refreshed for
	// an active notebook, which bounds its status writes.
	ReportInterval metav1.Duration `json:"reportInterval"`
	Culling        Culling         `json:"culling"`
	Probe          Probe           `json:"probe"`
	NetworkPolicy  NetworkPolicy   `json:"networkPolicy"`
	Ingress        Ingress         `json:"ingress"`
}

// Culling holds the defaults and upper bounds of Notebook.spec.culling.
type Culling struct {
	// Enabled is the default of spec.culling.enabled.
	Enabled bool `json:"enabled"`
	// IdleTimeout is the default idle timeout; MaxIdleTimeout the largest a
	// user may ask for (0: no bound).
	IdleTimeout    metav1.Duration `json:"idleTimeout"`
	MaxIdleTimeout metav1.Duration `json:"maxIdleTimeout"`
	// CheckPeriod is the default check period; MinCheckPeriod the shortest
	// a user may ask for, which bounds the probe load.
	CheckPeriod    metav1.Duration `json:"checkPeriod"`
	MinCheckPeriod metav1.Duration `json:"minCheckPeriod"`
	// MaxLifetime is the default maximum lifetime (0: none);
	// MaxLifetimeLimit the largest a user may ask for (0: no bound). A
	// non-zero limit also applies to notebooks that ask for none.
	MaxLifetime      metav1.Duration `json:"maxLifetime"`
	MaxLifetimeLimit metav1.Duration `json:"maxLifetimeLimit"`
	// WarningPeriod is how long before a cull the user is warned (an event
	// and status.cullDeadline). It is at most half the idle timeout.
	WarningPeriod metav1.Duration `json:"warningPeriod"`
}

// Probe configures the Jupyter activity prober.
type Probe struct {
	// Timeout of one probe (three HTTP requests).
	Timeout metav1.Duration `json:"timeout"`
	// Concurrency is the most probes running at once.
	Concurrency int `json:"concurrency"`
	// NamespaceConcurrency is the most probes running at once for the
	// notebooks of one namespace (at most Concurrency), so that one
	// tenant's servers that never answer cannot take every slot.
	NamespaceConcurrency int `json:"namespaceConcurrency"`
}

// NetworkPolicy configures the NetworkPolicy of every notebook.
type NetworkPolicy struct {
	// Enabled creates a NetworkPolicy that admits only the operator's prober,
	// IngressFrom and each Notebook's spec.access.allowFrom.
	Enabled bool `json:"enabled"`
	// OperatorNamespace and OperatorPodLabels select the operator's pods,
	// which probe the notebooks.
	OperatorNamespace string            `json:"operatorNamespace"`
	OperatorPodLabels map[string]string `json:"operatorPodLabels"`
	// IngressFrom selects the ingress path (for example the ingress
	// controller's namespace).
	IngressFrom []networkingv1.NetworkPolicyPeer `json:"ingressFrom"`
	// Egress, when enabled, restricts what a notebook's pods connect to.
	Egress Egress `json:"egress"`
}

// Egress restricts a notebook's pods to the cluster's DNS, the managed
// servers of the FeatureStores the Notebook references, and To: every
// other connection is refused. It is in the same NetworkPolicy as the
// ingress rules.
type Egress struct {
	Enabled bool `json:"enabled"`
	// DNS selects the cluster's DNS servers, reached on port 53 (UDP and
	// TCP).
	DNS DNS `json:"dns"`
	// To are the platform team's destinations, as NetworkPolicy egress
	// rules (pods, namespaces or CIDRs, with ports): a package mirror, an
	// experiment tracker, the servers of shared FeatureStoreBackends.
	To []networkingv1.NetworkPolicyEgressRule `json:"to"`
}

// DNS names the pods of the cluster's DNS service.
type DNS struct {
	Namespace string            `json:"namespace"`
	PodLabels map[string]string `json:"podLabels"`
}

// Ingress configures an optional Ingress per notebook, served under
// /notebook/<namespace>/<name>/ of one host.
type Ingress struct {
	Enabled       bool              `json:"enabled"`
	ClassName     string            `json:"className"`
	Host          string            `json:"host"`
	Annotations   map[string]string `json:"annotations"`
	TLSSecretName string            `json:"tlsSecretName"`
}

// Default is the configuration used for every field a file leaves out.
func Default() Config {
	return Config{
		DefaultImage:    "quay.io/jupyter/minimal-notebook:2025-03-14",
		ImagePullPolicy: corev1.PullIfNotPresent,
		UID:             1000,
		ClusterDomain:   "cluster.local",
		ReportInterval:  metav1.Duration{Duration: 10 * time.Minute},
		Culling: Culling{
			Enabled:        true,
			IdleTimeout:    metav1.Duration{Duration: time.Hour},
			MaxIdleTimeout: metav1.Duration{Duration: 24 * time.Hour},
			CheckPeriod:    metav1.Duration{Duration: time.Minute},
			MinCheckPeriod: metav1.Duration{Duration: 30 * time.Second},
			WarningPeriod:  metav1.Duration{Duration: 10 * time.Minute},
		},
		Probe: Probe{Timeout: metav1.Duration{Duration: 5 * time.Second}, Concurrency: 16, NamespaceConcurrency: 4},
		NetworkPolicy: NetworkPolicy{Enabled: true, Egress: Egress{
			DNS: DNS{Namespace: "kube-system", PodLabels: map[string]string{"k8s-app": "kube-dns"}},
		}},
	}
}

// Load reads a configuration file over the defaults; an empty path means
// Default. Unknown keys are errors, so a typo never silently keeps a
// default.
func Load(path string) (Config, error) {
	c := Default()
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	// A map in the file would be merged into the default's: the DNS pods'
	// labels are replaced instead, and default only when the file names
	// none.
	dns := c.NetworkPolicy.Egress.DNS
	c.NetworkPolicy.Egress.DNS = DNS{}
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return c, fmt.Errorf("notebook operator configuration %s: %w", path, err)
	}
	if c.NetworkPolicy.Egress.DNS.Namespace == "" {
		c.NetworkPolicy.Egress.DNS.Namespace = dns.Namespace
	}
	if len(c.NetworkPolicy.Egress.DNS.PodLabels) == 0 {
		c.NetworkPolicy.Egress.DNS.PodLabels = dns.PodLabels
	}
	return c, c.Validate()
}

// Validate reports settings the operator cannot work with.
func (c Config) Validate() error {
	var errs []error
	if c.DefaultImage == "" {
		errs = append(errs, errors.New("defaultImage is required"))
	}
	if c.ReportInterval.Duration <= 0 {
		errs = append(errs, errors.New("reportInterval must be positive"))
	}
	if c.Culling.IdleTimeout.Duration <= 0 || c.Culling.CheckPeriod.Duration <= 0 {
		errs = append(errs, errors.New("culling.idleTimeout and culling.checkPeriod must be positive"))
	}
	if c.Probe.Timeout.Duration <= 0 || c.Probe.Concurrency <= 0 || c.Probe.NamespaceConcurrency <= 0 {
		errs = append(errs, errors.New("probe.timeout, probe.concurrency and probe.namespaceConcurrency must be positive"))
	}
	if c.Ingress.Enabled && c.Ingress.Host == "" {
		errs = append(errs, errors.New("ingress.host is required when ingress.enabled is true"))
	}
	if c.NetworkPolicy.Enabled && c.NetworkPolicy.OperatorNamespace == "" {
		errs = append(errs, errors.New("networkPolicy.operatorNamespace is required when networkPolicy.enabled is true, so the prober can reach notebooks"))
	}
	if e := c.NetworkPolicy.Egress; e.Enabled && (e.DNS.Namespace == "" || len(e.DNS.PodLabels) == 0) {
		errs = append(errs, errors.New("networkPolicy.egress.dns.namespace and podLabels are required when networkPolicy.egress.enabled is true, or notebooks cannot resolve names"))
	}
	return errors.Join(errs...)
}

// Policy is the culling policy in force for one Notebook.
type Policy struct {
	// IdleTimeout is zero when idle culling is off.
	IdleTimeout time.Duration
	// MaxLifetime is zero when there is none.
	MaxLifetime   time.Duration
	CheckPeriod   time.Duration
	WarningPeriod time.Duration
}

// Active reports whether the notebook needs activity checks at all.
func (p Policy) Active() bool { return p.IdleTimeout > 0 || p.MaxLifetime > 0 }

// PolicyFor applies the defaults and bounds to a Notebook's culling spec.
func (c Culling) PolicyFor(spec notebooksv1alpha1.Culling) Policy {
	p := Policy{CheckPeriod: c.CheckPeriod.Duration, WarningPeriod: c.WarningPeriod.Duration}
	if spec.CheckPeriod != nil {
		p.CheckPeriod = spec.CheckPeriod.Duration
	}
	p.CheckPeriod = max(p.CheckPeriod, c.MinCheckPeriod.Duration)

	enabled := c.Enabled
	if spec.Enabled != nil {
		enabled = *spec.Enabled
	}
	if enabled {
		p.IdleTimeout = c.IdleTimeout.Duration
		if spec.IdleTimeout != nil {
			p.IdleTimeout = spec.IdleTimeout.Duration
		}
		if limit := c.MaxIdleTimeout.Duration; limit > 0 {
			p.IdleTimeout = min(p.IdleTimeout, limit)
		}
	}

	p.MaxLifetime = c.MaxLifetime.Duration
	if spec.MaxLifetime != nil {
		p.MaxLifetime = spec.MaxLifetime.Duration
	}
	if limit := c.MaxLifetimeLimit.Duration; limit > 0 && (p.MaxLifetime == 0 || p.MaxLifetime > limit) {
		p.MaxLifetime = limit
	}

	// A warning longer than the timeout would be given before the user
	// could have been idle at all.
	if p.IdleTimeout > 0 {
		p.WarningPeriod = min(p.WarningPeriod, p.IdleTimeout/2)
	}
	if p.MaxLifetime > 0 {
		p.WarningPeriod = min(p.WarningPeriod, p.MaxLifetime/2)
	}
	return p
}
