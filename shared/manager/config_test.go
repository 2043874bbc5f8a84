package manager

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ignoreZap leaves the logger options out of comparisons: they hold
// functions, and their flags belong to controller-runtime.
var ignoreZap = cmp.Options{cmpopts.IgnoreFields(Config{}, "Zap"), cmpopts.IgnoreUnexported(Config{})}

func TestFlags(t *testing.T) {
	testCases := map[string]struct {
		podNamespace string
		args         []string
		want         func(*Config)
	}{
		"defaults": {
			want: func(*Config) {},
		},
		"memory limit as a quantity": {
			args: []string{"--memory-limit=1Gi"},
			want: func(c *Config) { c.MemoryLimit = 1 << 30 },
		},
		"leader election namespace from POD_NAMESPACE": {
			podNamespace: "ml-system",
			want:         func(c *Config) { c.LeaderElectionNamespace = "ml-system" },
		},
		"every flag set": {
			podNamespace: "ml-system",
			args: []string{
				"--metrics-bind-address=:9090", "--metrics-secure=false", "--metrics-cert-dir=/certs", "--enable-http2",
				"--health-probe-bind-address=:9091",
				"--leader-elect=false", "--leader-election-namespace=other",
				"--leader-election-lease-duration=60s", "--leader-election-renew-deadline=40s", "--leader-election-retry-period=5s",
				"--leader-election-renew-interval=10s", "--pprof-bind-address=127.0.0.1:6060",
				"--kube-api-qps=20", "--kube-api-burst=30", "--max-concurrent-reconciles=4", "--max-backoff=1m", "--graceful-shutdown-timeout=10s",
				"--priority-queue=false", "--warm-standby", "--memory-limit=536870912",
				"--metrics-tokenreview-qps=3", "--metrics-tokenreview-burst=6", "--metrics-token-cache-ttl=2m",
				"--metrics-token-negative-cache-ttl=5s", "--metrics-token-cache-size=50",
				"--metrics-source-tokenreview-rate=1", "--metrics-source-tokenreview-burst=2", "--metrics-max-sources=70",
			},
			want: func(c *Config) {
				c.MetricsBindAddress = ":9090"
				c.MetricsSecure = false
				c.MetricsCertDir = "/certs"
				c.EnableHTTP2 = true
				c.HealthProbeBindAddress = ":9091"
				c.LeaderElect = false
				c.LeaderElectionNamespace = "other"
				c.LeaseDuration = 60 * time.Second
				c.RenewDeadline = 40 * time.Second
				c.RetryPeriod = 5 * time.Second
				c.RenewInterval = 10 * time.Second
				c.PprofBindAddress = "127.0.0.1:6060"
				c.KubeAPIQPS = 20
				c.KubeAPIBurst = 30
				c.MaxConcurrentReconciles = 4
				c.MaxBackoff = time.Minute
				c.GracefulShutdownTimeout = 10 * time.Second
				c.PriorityQueue, c.WarmStandby = false, true
				c.MemoryLimit = 512 << 20
				c.MetricsAuth.Reviews.Rate, c.MetricsAuth.Reviews.Burst = 3, 6
				c.MetricsAuth.Reviews.CacheTTL, c.MetricsAuth.Reviews.NegativeTTL, c.MetricsAuth.Reviews.CacheSize = 2*time.Minute, 5*time.Second, 50
				c.MetricsAuth.SourceRate, c.MetricsAuth.SourceBurst, c.MetricsAuth.MaxSources = 1, 2, 70
			},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.podNamespace)
			got := DefaultConfig()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			got.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}

			want := Config{
				MetricsBindAddress:      ":8443",
				MetricsSecure:           true,
				MetricsAuth:             defaultMetricsAuth(),
				HealthProbeBindAddress:  ":8081",
				LeaderElect:             true,
				LeaderElectionNamespace: "default",
				LeaseDuration:           7 * time.Second,
				RenewDeadline:           3 * time.Second,
				RetryPeriod:             500 * time.Millisecond,
				RenewInterval:           2500 * time.Millisecond,
				KubeAPIQPS:              50,
				KubeAPIBurst:            100,
				MaxConcurrentReconciles: 1,
				MaxBackoff:              5 * time.Minute,
				PriorityQueue:           true,
				GracefulShutdownTimeout: 20 * time.Second,
			}
			if tc.podNamespace != "" {
				want.LeaderElectionNamespace = tc.podNamespace
			}
			tc.want(&want)
			if diff := cmp.Diff(want, got, ignoreZap); diff != "" {
				t.Errorf("Config after parsing %q (-want +got):\n%s", tc.args, diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestLoggingDefaultsToJSON(t *testing.T) {
	testCases := map[string]struct {
		args     []string
		wantJSON bool
	}{
		"default":        {wantJSON: true},
		"console":        {args: []string{"--zap-encoder=console"}, wantJSON: false},
		"debug level":    {args: []string{"--zap-log-level=debug"}, wantJSON: true},
		"development on": {args: []string{"--zap-devel"}, wantJSON: false},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cfg.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			logger := zap.New(zap.UseFlagOptions(&cfg.Zap), zap.WriteTo(&out))
			logger.Info("hello", "key", "value")

			line := strings.TrimSpace(out.String())
			isJSON := strings.HasPrefix(line, "{") && strings.Contains(line, `"msg":"hello"`)
			if isJSON != tc.wantJSON {
				t.Errorf("log line %q: JSON = %v, want %v", line, isJSON, tc.wantJSON)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	testCases := map[string]struct {
		change  func(*Config)
		wantErr string
	}{
		"defaults are valid": {
			change: func(*Config) {},
		},
		"lease not longer than renew deadline": {
			change:  func(c *Config) { c.LeaseDuration = c.RenewDeadline },
			wantErr: "--leader-election-lease-duration",
		},
		"renew deadline too close to retry period": {
			change:  func(c *Config) { c.RetryPeriod = c.RenewDeadline },
			wantErr: "--leader-election-renew-deadline",
		},
		"negative renew interval": {
			change:  func(c *Config) { c.RenewInterval = -time.Second },
			wantErr: "--leader-election-renew-interval",
		},
		"bad lease timings are fine without leader election": {
			change: func(c *Config) { c.LeaderElect = false; c.LeaseDuration = time.Second },
		},
		"empty leader election namespace": {
			change:  func(c *Config) { c.LeaderElectionNamespace = "" },
			wantErr: "--leader-election-namespace",
		},
		"zero QPS": {
			change:  func(c *Config) { c.KubeAPIQPS = 0 },
			wantErr: "--kube-api-qps",
		},
		"zero concurrent reconciles": {
			change:  func(c *Config) { c.MaxConcurrentReconciles = 0 },
			wantErr: "--max-concurrent-reconciles",
		},
		"zero metrics TokenReview rate": {
			change:  func(c *Config) { c.MetricsAuth.Reviews.Rate = 0 },
			wantErr: "--metrics-tokenreview-qps",
		},
		"no metrics budget needed without secure metrics": {
			change: func(c *Config) { c.MetricsSecure = false; c.MetricsAuth.Reviews.Rate = 0 },
		},
		"zero max backoff": {
			change:  func(c *Config) { c.MaxBackoff = 0 },
			wantErr: "--max-backoff",
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.change(&cfg)
			err := cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want an error about %s", err, tc.wantErr)
			}
		})
	}
}

func TestControllerOptionsBackOffUpToMaxBackoff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxBackoff = 2 * time.Second
	limiter := cfg.ControllerOptions().RateLimiter
	item := reconcile.Request{}
	item.Name = "failing"

	var delays []time.Duration
	for range 16 {
		delays = append(delays, limiter.When(item))
	}
	// 5ms doubling reaches the cap on the tenth failure: 5ms * 2^9 = 2.56s.
	want := []time.Duration{
		5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond,
		80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond, 640 * time.Millisecond,
		1280 * time.Millisecond, 2 * time.Second, 2 * time.Second, 2 * time.Second,
		2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second,
	}
	if diff := cmp.Diff(want, delays); diff != "" {
		t.Errorf("delays after repeated failures (-want +got):\n%s", diff)
	}

	limiter.Forget(item)
	if got := limiter.When(item); got != 5*time.Millisecond {
		t.Errorf("delay after Forget = %v, want 5ms", got)
	}
	if other := cfg.ControllerOptions().RateLimiter; other == limiter {
		t.Error("ControllerOptions returned the same rate limiter twice; controllers would share failure counts")
	}
}

func TestOperatorDefaultsYieldToFlags(t *testing.T) {
	measured := func(c *Config) { c.KubeAPIQPS, c.KubeAPIBurst, c.MaxConcurrentReconciles = 300, 600, 8 }
	testCases := map[string]struct {
		defaults func(*Config)
		args     []string
		want     [3]float64 // QPS, burst, concurrent reconciles
	}{
		"the operator's defaults":       {defaults: measured, want: [3]float64{300, 600, 8}},
		"flags override them":           {defaults: measured, args: []string{"--kube-api-qps=20", "--max-concurrent-reconciles=2"}, want: [3]float64{20, 600, 2}},
		"shared defaults without hooks": {want: [3]float64{50, 100, 1}},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cfg := boundConfig(Options{Defaults: tc.defaults}, fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got := [3]float64{cfg.KubeAPIQPS, float64(cfg.KubeAPIBurst), float64(cfg.MaxConcurrentReconciles)}
			if got != tc.want {
				t.Errorf("QPS, burst, concurrent reconciles = %v, want %v", got, tc.want)
			}
			if co := cfg.ControllerOptions(); co.MaxConcurrentReconciles != cfg.MaxConcurrentReconciles {
				t.Errorf("ControllerOptions().MaxConcurrentReconciles = %d, want %d", co.MaxConcurrentReconciles, cfg.MaxConcurrentReconciles)
			}
		})
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	testCases := map[string]struct {
		opts Options
	}{
		"no name":          {opts: Options{}},
		"name not a label": {opts: Options{Name: "Training_Operator"}},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			if _, err := New(DefaultConfig(), tc.opts); err == nil {
				t.Error("New() = nil error, want one")
			}
		})
	}
}

// TestRenewIntervalFitsTheLease: a leader must have stopped before a
// standby can take over, so an interval that leaves no room for the retry
// period and the renew deadline within the lease writes every renewal, as
// timings chosen before the interval existed did.
func TestRenewIntervalFitsTheLease(t *testing.T) {
	cases := map[string]struct {
		lease, deadline, retry, interval time.Duration
		want                             time.Duration
	}{
		"the defaults":                    {7 * time.Second, 3 * time.Second, 500 * time.Millisecond, 2500 * time.Millisecond, 2500 * time.Millisecond},
		"the timings before the interval": {6 * time.Second, 4 * time.Second, time.Second, 2500 * time.Millisecond, 0},
		"exactly the lease":               {7 * time.Second, 3 * time.Second, time.Second, 3 * time.Second, 0},
		"long timings":                    {30 * time.Second, 20 * time.Second, 5 * time.Second, 2500 * time.Millisecond, 2500 * time.Millisecond},
		"zero":                            {7 * time.Second, 3 * time.Second, 500 * time.Millisecond, 0, 0},
	}
	for name, tc := range cases {
		c := Config{LeaseDuration: tc.lease, RenewDeadline: tc.deadline, RetryPeriod: tc.retry, RenewInterval: tc.interval}
		if got := c.effectiveRenewInterval(); got != tc.want {
			t.Errorf("%s: effective renew interval %v, want %v", name, got, tc.want)
		}
	}
}
