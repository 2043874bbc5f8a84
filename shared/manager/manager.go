package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/logging"
	"github.com/ml-platform/ml-platform/shared/metrics"
	"github.com/ml-platform/ml-platform/shared/tracing"
)

// leaderElectionSuffix makes lease names unique to ml-platform, so no other
// software's lease in the same namespace can collide with an operator's.
const leaderElectionSuffix = ".mlplatform.dev"

// tracingShutdownTimeout bounds the final span flush, so an unreachable
// collector cannot hold up the exit after the manager has stopped.
const tracingShutdownTimeout = 5 * time.Second

// Options describe an operator; unlike Config they do not change between
// runs.
type Options struct {
	// Name is the binary's name, such as "trainingjob-operator". It names
	// the leader election lease, the field manager of every write, the
	// API client's user agent, the tracing service and the value of
	// commonv1alpha1.LabelManagedBy.
	Name string

	// Scheme knows every kind the operator reads or writes. When it is
	// nil, New builds it from AddToScheme.
	Scheme *runtime.Scheme

	// AddToScheme register the kinds the operator reads or writes, for
	// New to build the Scheme: a failure is a startup error like any
	// other, returned by New, so a cmd/main.go has one error path.
	AddToScheme []func(*runtime.Scheme) error

	// OwnedObjects are the kinds the operator creates, such as Pods or
	// Secrets. Their caches hold only objects labelled commonv1alpha1.LabelManagedBy=Name,
	// so an operator never caches every Pod or Secret in the cluster. The
	// cached client cannot see unlabelled objects of these kinds: read
	// those, such as a user's Secret, with the manager's APIReader.
	OwnedObjects []client.Object

	// OptionalOwnedObjects are owned kinds of CRDs a cluster may lack (the
	// Kubeflow job kinds): those the API server serves when the manager is
	// built are cached like OwnedObjects; the others are left out, because
	// a label-restricted cache of a kind the server does not know fails
	// the manager's creation.
	OptionalOwnedObjects []client.Object

	// Transforms slim the cached objects of a kind, keyed by an object of
	// the kind (an owned one as in OwnedObjects, or the operator's own such
	// as StripLastApplied's): what an operator never reads from a cached
	// object, such as the pod template of a Job it only creates, need not
	// stay in memory for every one. A transform must keep every field the
	// operator reads from the cache, and the operator must never write a
	// cached object of that kind back whole (Update); a patch that names
	// its fields is safe. Managed fields are stripped and the repeated
	// strings interned before it runs.
	Transforms map[client.Object]toolscache.TransformFunc

	// Fields restrict the caches of owned kinds further, by the API
	// server's field selectors, keyed by an object of the kind: such as
	// pods that have not succeeded, for an operator that reads nothing of a
	// pod that succeeded but that it exists. NewMetadataCache holds the
	// metadata of the objects a selector leaves out, where an operator
	// needs it.
	Fields map[client.Object]fields.Selector

	// InternLabels are the label keys whose values repeat across the
	// operator's cached objects (a run number, a queue's name), besides
	// commonv1alpha1.LabelManagedBy: every cache shares one copy of each of
	// their values, as it does of namespaces, label keys and condition
	// reasons (see Intern). A label whose value is unique to an object,
	// such as a job's name, does not belong here.
	InternLabels []string

	// Setup registers the operator's reconcilers.
	Setup func(mgr ctrl.Manager, cfg Config) error

	// Defaults, when set, changes DefaultConfig's values for this operator
	// before the command line is parsed, such as client limits measured
	// for its load; flags still override them.
	Defaults func(*Config)
}

// ManagedByLabels returns the label that puts an object into the
// operator's cache, for reconcilers to merge into the labels of what they
// create.
func ManagedByLabels(name string) map[string]string {
	return map[string]string{commonv1alpha1.LabelManagedBy: name}
}

// LeaderElectionID is the name of the operator's leader election lease.
func LeaderElectionID(name string) string {
	return name + leaderElectionSuffix
}

// Main parses the command line, runs the operator until SIGTERM or SIGINT
// and exits non-zero if it failed.
func Main(opts Options) {
	cfg := boundConfig(opts, flag.CommandLine)
	flag.Parse()

	// The logger never enables levels above logging.MaxLevel, where
	// client-go would dump Secrets from request and response bodies.
	// client-go's leader election and warnings log through klog; routing
	// them to the same logger keeps one format in the operator's output.
	logging.SetGlobal(logging.New(zap.UseFlagOptions(&cfg.Zap)))
	if cfg.Zap.Level != nil && cfg.Zap.Level.Enabled(zapcore.Level(-logging.MaxLevel-1)) {
		ctrl.Log.WithName("setup").Info("Log level capped: levels above the cap would log credentials", "maxLevel", logging.MaxLevel)
	}
	applyMemoryLimit(*cfg, os.Getenv("GOMEMLIMIT"))

	if err := Run(ctrl.SetupSignalHandler(), *cfg, opts); err != nil {
		ctrl.Log.WithName("setup").Error(err, "Operator failed", "operator", opts.Name)
		os.Exit(1)
	}
}

// boundConfig returns the operator's defaults (DefaultConfig changed by
// opts.Defaults) with every flag bound to fs, for fs.Parse to fill.
func boundConfig(opts Options, fs *flag.FlagSet) *Config {
	cfg := DefaultConfig()
	if opts.Defaults != nil {
		opts.Defaults(&cfg)
	}
	cfg.BindFlags(fs)
	return &cfg
}

// Run sets up tracing, builds the manager and runs it until ctx is done.
func Run(ctx context.Context, cfg Config, opts Options) error {
	// OpenTelemetry reports export failures through a logger of its own;
	// routing it to ours keeps them in the operator's structured logs.
	otel.SetLogger(ctrl.Log.WithName("otel"))
	shutdownTracing, err := tracing.Setup(ctx, opts.Name)
	if err != nil {
		return fmt.Errorf("setting up tracing: %w", err)
	}
	defer func() {
		// ctx is already cancelled here, and the flush must still run.
		flushCtx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
		defer cancel()
		if err := shutdownTracing(flushCtx); err != nil {
			ctrl.Log.WithName("setup").Error(err, "Flushing traces failed")
		}
	}()

	mgr, err := New(cfg, opts)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Starting manager", "operator", opts.Name)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// New builds the manager and registers the health checks and the
// operator's reconcilers, without starting anything.
func New(cfg Config, opts Options) (ctrl.Manager, error) {
	opts, err := prepare(cfg, opts)
	if err != nil {
		return nil, err
	}
	restConfig, err := clusterConfig(cfg, opts.Name)
	if err != nil {
		return nil, err
	}
	// Every client of the manager reports through its transport whether
	// the API server is reachable; the controllers' rate limiters use it.
	cfg.apiServer = &apiServerHealth{}
	cfg.apiServer.wrap(restConfig)

	byObject, err := ownedCaches(restConfig, opts)
	if err != nil {
		return nil, err
	}
	mgrOpts := managerOptions(cfg, opts, byObject)
	var lock *resourcelock.LeaseLock
	if cfg.LeaderElect {
		if lock, err = newLeaseLock(restConfig, cfg, opts.Name); err != nil {
			return nil, err
		}
		mgrOpts.LeaderElectionResourceLockInterface = &sparseRenewals{LeaseLock: lock, interval: cfg.effectiveRenewInterval(), now: time.Now}
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := setUp(mgr, cfg, opts); err != nil {
		return nil, err
	}
	if lock == nil {
		return mgr, nil
	}
	lock.LockConfig.EventRecorder = mgr.GetEventRecorderFor(lock.Identity())
	return &releasingManager{Manager: mgr, lock: lock, timeout: cfg.RenewDeadline}, nil
}

// prepare validates the options and the configuration and builds the
// scheme from AddToScheme when none was given.
func prepare(cfg Config, opts Options) (Options, error) {
	if err := validateOptions(opts); err != nil {
		return opts, err
	}
	if err := cfg.Validate(); err != nil {
		return opts, err
	}
	if opts.Scheme == nil && len(opts.AddToScheme) > 0 {
		scheme, err := NewScheme(opts.AddToScheme...)
		if err != nil {
			return opts, err
		}
		opts.Scheme = scheme
	}
	return opts, nil
}

// ownedCaches restricts the cache of every owned kind the API server serves
// to the objects labelled as the operator's.
func ownedCaches(restConfig *rest.Config, opts Options) (map[client.Object]cache.ByObject, error) {
	owned, err := servedObjects(restConfig, opts)
	if err != nil {
		return nil, err
	}
	managedBy := labels.SelectorFromSet(ManagedByLabels(opts.Name))
	byObject := make(map[client.Object]cache.ByObject, len(owned))
	for _, obj := range owned {
		byObject[obj] = cache.ByObject{Label: managedBy, Field: fieldsOf(opts, obj), Transform: transformOf(opts, obj)}
	}
	for _, obj := range unownedTransformed(opts) {
		byObject[obj] = cache.ByObject{Transform: transformOf(opts, obj)}
	}
	return byObject, nil
}

// unownedTransformed are the kinds with a transform that the operator does
// not own (its own kinds), whose caches hold every object of the kind. A
// kind held as unstructured is left out: the cache needs the REST mapping
// of each kind configured for it when it starts, and such a kind's CRD
// (Kueue's Workload) may come later; the default transform applies its
// transform instead (defaultTransform).
func unownedTransformed(opts Options) []client.Object {
	owned := map[reflect.Type]bool{}
	for _, obj := range slices.Concat(opts.OwnedObjects, opts.OptionalOwnedObjects) {
		owned[reflect.TypeOf(obj)] = true
	}
	var out []client.Object
	for proto := range opts.Transforms {
		if _, ok := proto.(*unstructured.Unstructured); !ok && !owned[reflect.TypeOf(proto)] {
			out = append(out, proto)
		}
	}
	return out
}

// sameKind is true when obj is of proto's kind: of its Go type and, for an
// unstructured object, which may hold any kind, of its GroupVersionKind.
func sameKind(proto, obj client.Object) bool {
	if reflect.TypeOf(proto) != reflect.TypeOf(obj) {
		return false
	}
	u, ok := proto.(*unstructured.Unstructured)
	return !ok || u.GroupVersionKind() == obj.GetObjectKind().GroupVersionKind()
}

// fieldsOf is the field selector opts.Fields gives obj's kind, nil for
// none.
func fieldsOf(opts Options, obj client.Object) fields.Selector {
	for proto, sel := range opts.Fields {
		if sameKind(proto, obj) {
			return sel
		}
	}
	return nil
}

// StripLastApplied is a transform for an operator's own kinds: it drops
// kubectl's last-applied-configuration annotation, a second copy of the
// whole object as a user last applied it (about as large as the spec), which
// no operator reads. Objects of the kind must be written through patches
// that name their fields, as shared/patch does: the annotation then stays
// on the live object.
func StripLastApplied(in any) (any, error) {
	o, ok := in.(metav1.Object)
	if !ok {
		return in, nil
	}
	if a := o.GetAnnotations(); a != nil {
		if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
			delete(a, corev1.LastAppliedConfigAnnotation)
			if len(a) == 0 {
				o.SetAnnotations(nil)
			}
		}
	}
	return in, nil
}

// transformOf is the cache transform of obj's kind: defaultTransform
// (managed fields stripped, repeated strings interned), then the
// operator's own transform of the kind, which so works on the shared
// copies; nil (the manager's default, defaultTransform alone) when it has
// none.
func transformOf(opts Options, obj client.Object) toolscache.TransformFunc {
	for proto, fn := range opts.Transforms {
		if sameKind(proto, obj) {
			return withDefault(opts, fn)
		}
	}
	return nil
}

// withDefault is defaultTransform, then fn when it is not nil: fn so works
// on the shared copies of the repeated strings.
func withDefault(opts Options, fn toolscache.TransformFunc) toolscache.TransformFunc {
	common := baseTransform(opts)
	if fn == nil {
		return common
	}
	return func(in any) (any, error) {
		out, err := common(in)
		if err != nil {
			return nil, err
		}
		return fn(out)
	}
}

// CacheTransform is what the operator's cache does to each decoded object
// of obj's kind: transformOf, or the default transform for a kind without
// a transform of its own. Tests and benchmarks use it to see an object as
// the cache holds it.
func CacheTransform(opts Options, obj client.Object) toolscache.TransformFunc {
	if fn := transformOf(opts, obj); fn != nil {
		return fn
	}
	return defaultTransform(opts)
}

// defaultTransform is the transform of every cached kind without a cache
// of its own: baseTransform, then, for an object held as unstructured, the
// operator's transform of its kind (unownedTransformed says why those have
// no cache of their own).
func defaultTransform(opts Options) toolscache.TransformFunc {
	base := baseTransform(opts)
	byKind := map[schema.GroupVersionKind]toolscache.TransformFunc{}
	for proto, fn := range opts.Transforms {
		if u, ok := proto.(*unstructured.Unstructured); ok && fn != nil {
			byKind[u.GroupVersionKind()] = fn
		}
	}
	if len(byKind) == 0 {
		return base
	}
	return func(in any) (any, error) {
		out, err := base(in)
		if err != nil {
			return nil, err
		}
		if u, ok := out.(*unstructured.Unstructured); ok {
			if fn := byKind[u.GroupVersionKind()]; fn != nil {
				return fn(out)
			}
		}
		return out, nil
	}
}

// baseTransform is what every cached object goes through: managed fields
// stripped (nothing in ml-platform reads them, and they are often the
// largest part of a cached object), then the repeated strings interned.
func baseTransform(opts Options) toolscache.TransformFunc {
	strip, intern := cache.TransformStripManagedFields(), internTransform(opts.InternLabels, commonv1alpha1.LabelManagedBy)
	return func(in any) (any, error) {
		out, err := strip(in)
		if err != nil {
			return nil, err
		}
		return intern(out)
	}
}

// managerOptions is the controller-runtime configuration of the manager.
func managerOptions(cfg Config, opts Options, byObject map[client.Object]cache.ByObject) ctrl.Options {
	return ctrl.Options{
		Scheme: opts.Scheme,
		Cache: cache.Options{
			DefaultTransform: defaultTransform(opts),
			ByObject:         byObject,
			NewInformer:      newInformer,
			// A namespace-scoped install may list and watch only in its
			// namespaces: a cluster-wide informer would be forbidden.
			DefaultNamespaces: cfg.CacheNamespaces(),
		},
		NewClient:                     newClient(opts.Name),
		Controller:                    ctrlconfig.Controller{SkipNameValidation: &cfg.SkipControllerNameValidation, UsePriorityQueue: &cfg.PriorityQueue, EnableWarmup: &cfg.WarmStandby},
		Metrics:                       metricsOptions(cfg),
		HealthProbeBindAddress:        cfg.HealthProbeBindAddress,
		PprofBindAddress:              cfg.PprofBindAddress,
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              LeaderElectionID(opts.Name),
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &cfg.LeaseDuration,
		RenewDeadline:                 &cfg.RenewDeadline,
		RetryPeriod:                   &cfg.RetryPeriod,
		GracefulShutdownTimeout:       &cfg.GracefulShutdownTimeout,
	}
}

// newClient makes the manager's clients write as the operator's field owner.
func newClient(name string) client.NewClientFunc {
	return func(config *rest.Config, o client.Options) (client.Client, error) {
		// Objects read as unstructured, such as FeatureStores that an
		// operator reads without importing their types (shared/featureref),
		// come from the informer cache too rather than from the API
		// server on every reconcile.
		if o.Cache != nil {
			o.Cache.Unstructured = true
		}
		c, err := client.New(config, o)
		if err != nil {
			return nil, err
		}
		return client.WithFieldOwner(c, name), nil
	}
}

// setUp registers the stalled-objects collector, the health checks and the
// operator's reconcilers.
func setUp(mgr ctrl.Manager, cfg Config, opts Options) error {
	registerStalledCollector(mgr)
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	if opts.Setup == nil {
		return nil
	}
	setupMgr := mgr
	if cfg.WarmStandby {
		w := &warmups{Manager: mgr}
		if err := mgr.AddReadyzCheck("warmup", w.ready); err != nil {
			return fmt.Errorf("adding readiness check: %w", err)
		}
		setupMgr = w
	}
	if err := opts.Setup(setupMgr, cfg); err != nil {
		return fmt.Errorf("setting up reconcilers: %w", err)
	}
	return nil
}

// NewScheme returns a scheme with the kinds of every add registered.
func NewScheme(adds ...func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range adds {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return scheme, nil
}

func validateOptions(opts Options) error {
	if opts.Name == "" {
		return errors.New("manager: Options.Name is required")
	}
	// The name becomes a label value and part of the lease name, so it
	// must be valid as both.
	if errs := validation.IsDNS1123Label(opts.Name); len(errs) > 0 {
		return fmt.Errorf("manager: Options.Name %q: %v", opts.Name, errs)
	}
	return nil
}

// clusterConfig copies the REST config before changing it, because tests
// pass one config to several managers.
func clusterConfig(cfg Config, name string) (*rest.Config, error) {
	base := cfg.RESTConfig
	if base == nil {
		var err error
		if base, err = ctrl.GetConfig(); err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
	}
	restConfig := rest.CopyConfig(base)
	restConfig.QPS = float32(cfg.KubeAPIQPS)
	restConfig.Burst = cfg.KubeAPIBurst
	restConfig.UserAgent = name
	tracing.WrapTransport(restConfig)
	return restConfig, nil
}

func metricsOptions(cfg Config) metricsserver.Options {
	o := metricsserver.Options{
		BindAddress:   cfg.MetricsBindAddress,
		SecureServing: cfg.MetricsSecure,
		CertDir:       cfg.MetricsCertDir,
	}
	if !cfg.EnableHTTP2 {
		o.TLSOpts = append(o.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if cfg.MetricsSecure {
		o.FilterProvider = cfg.MetricsAuth.filterProvider()
	}
	return o
}

// registerStalledCollector exports mlplatform_objects_stalled for the
// operator's own kinds, counted from the manager's cache once its replica
// leads (see metrics.WhenElected). A process that builds several managers
// (tests) keeps the newest one's.
func registerStalledCollector(mgr ctrl.Manager) {
	stalled := metrics.NewStalledCollector(mgr.GetCache(), mgr.GetScheme())
	if err := metrics.Replace(metrics.WhenElected(stalled, mgr.Elected())); err != nil {
		ctrl.Log.WithName("setup").Error(err, "Registering the Stalled objects metric failed")
	}
}

// servedObjects is OwnedObjects plus the OptionalOwnedObjects whose kind the
// API server serves.
func servedObjects(cfg *rest.Config, opts Options) ([]client.Object, error) {
	out := append([]client.Object(nil), opts.OwnedObjects...)
	if len(opts.OptionalOwnedObjects) == 0 {
		return out, nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, obj := range opts.OptionalOwnedObjects {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return nil, err
		}
		list, err := dc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("discovering %s: %w", gvk.GroupVersion(), err)
		}
		for _, r := range list.APIResources {
			if r.Kind == gvk.Kind {
				out = append(out, obj)
				break
			}
		}
	}
	return out, nil
}

// AddCache adds to mgr a cache an operator builds beside the manager's own
// (a field-selected or namespace-scoped one its controllers watch), so that
// it runs as the manager's own does: on every replica, leader or not, and
// synced before the controllers start. Added with mgr.Add, a cache would
// start only once its replica leads (controller-runtime puts a runnable it
// does not know among the leader's), and the controllers of a warm standby,
// whose sources start before it leads, would wait for it in vain until the
// cache sync timeout ended the process: a standby that exits every two
// minutes.
func AddCache(mgr ctrl.Manager, c cache.Cache) error {
	return mgr.Add(managedCache{c})
}

// NewMetadataCache adds to mgr, as AddCache does, a cache of the metadata
// of the operator's objects of obj's kind (labelled as its own, as
// OwnedObjects are) that match fields, and returns it: for the objects
// that Options.Fields leaves out of the kind's own cache and that the
// operator still needs to know exist, such as pods that succeeded and
// that a clean-pod policy deletes. A pod's metadata is a fraction of a
// typed pod's heap (the struct of a Pod alone is over a kilobyte). Its
// objects pass through the manager's default transform (managed fields
// stripped, repeated strings interned), then through transform when it is
// not nil. namespaces limits it as Config.CacheNamespaces does the
// manager's caches; nil means every namespace.
func NewMetadataCache(mgr ctrl.Manager, opts Options, namespaces map[string]cache.Config, obj *metav1.PartialObjectMetadata, fields fields.Selector, transform toolscache.TransformFunc) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		NewInformer:       newInformer,
		DefaultNamespaces: namespaces,
		ByObject: map[client.Object]cache.ByObject{obj: {
			Label:     labels.SelectorFromSet(ManagedByLabels(opts.Name)),
			Field:     fields,
			Transform: MetadataTransform(opts, transform),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("building the metadata cache of %s: %w", obj.GroupVersionKind().Kind, err)
	}
	if err := AddCache(mgr, c); err != nil {
		return nil, err
	}
	return c, nil
}

// MetadataTransform is what a cache of NewMetadataCache does to each
// object: the default transform, then transform when it is not nil.
// Tests and benchmarks use it to see an object as that cache holds it.
func MetadataTransform(opts Options, transform toolscache.TransformFunc) toolscache.TransformFunc {
	return withDefault(opts, transform)
}

// managedCache is what controller-runtime's manager recognizes as a cache
// of its own: a runnable with GetCache.
type managedCache struct{ cache.Cache }

func (c managedCache) GetCache() cache.Cache { return c.Cache }
