// Package controller wires the FeatureStore operator's reconcilers to a
// manager.
package controller

import (
	"errors"
	"flag"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestorebackend"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/pendingcleanup"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// Options are the operator's own flags.
type Options struct {
	featurestore.Options
	// Tune, when set, adjusts the FeatureStore reconciler and the
	// controller options before registration (tests).
	Tune func(*featurestore.Reconciler, *controller.Options)
	// TuneBackend, when set, adjusts the FeatureStoreBackend reconciler
	// before registration (tests).
	TuneBackend func(*featurestorebackend.Reconciler)
}

// BindFlags registers the operator's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Namespace, "operator-namespace", defaultNamespace(),
		"The operator's namespace, holding the FeatureStoreBackends' admin Secrets and handed-off cleanups. Defaults to $POD_NAMESPACE, else featurestore-system (for `make run-featurestore`).")
	fs.DurationVar(&o.GracePeriod, "rotation-grace-period", featurestore.DefaultGracePeriod,
		"How long previous credentials keep working after a rotation; longer than the kubelet's Secret refresh.")
	fs.DurationVar(&o.DriftInterval, "drift-check-interval", featurestore.DefaultDriftInterval,
		"How often Ready stores, and every FeatureStoreBackend's admin credentials, are checked again on their servers.")
	fs.StringVar(&o.Images.Postgres, "managed-postgres-image", "postgres:15", "Image of managed PostgreSQL servers.")
	fs.StringVar(&o.Images.Redis, "managed-redis-image", "redis:7.0", "Image of managed Redis servers.")
	fs.BoolVar(&o.NetworkPolicy.Enabled, "managed-network-policy", true,
		"Give every FeatureStore with a managed server a NetworkPolicy admitting to its PostgreSQL and Redis only the operator's pods (--operator-pod-labels in --operator-namespace) and the pods bound to the store. Turn it off where no NetworkPolicy engine runs or the operator runs outside the cluster.")
	fs.Func("operator-pod-labels", "Labels (k=v,k2=v2) that select the operator's own pods in --operator-namespace, for the managed servers' NetworkPolicy. Empty admits every pod of that namespace.", func(v string) error {
		set, err := labels.ConvertSelectorToLabelsMap(v)
		o.NetworkPolicy.OperatorPodLabels = set
		return err
	})
}

func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "featurestore-system"
}

// Scheme knows every kind the operator reads or writes.
func Scheme() (*runtime.Scheme, error) {
	return manager.NewScheme(addToScheme...)
}

// addToScheme registers the kinds the operator reads or writes.
var addToScheme = []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, featuresv1alpha1.AddToScheme}

// ManagerOptions describe the operator to shared/manager.
func ManagerOptions(opts *Options) manager.Options {
	return manager.Options{
		Name:        featurestore.OperatorName,
		AddToScheme: addToScheme,
		OwnedObjects: []client.Object{
			&corev1.Secret{}, &corev1.Service{}, &corev1.ConfigMap{}, &appsv1.StatefulSet{}, &networkingv1.NetworkPolicy{},
		},
		Transforms: map[client.Object]toolscache.TransformFunc{&featuresv1alpha1.FeatureStore{}: manager.StripLastApplied},
		Setup:      func(mgr ctrl.Manager, cfg manager.Config) error { return Setup(mgr, cfg, opts) },
	}
}

// Setup registers the reconcilers.
func Setup(mgr ctrl.Manager, cfg manager.Config, opts *Options) error {
	if opts.Namespace == "" {
		return errors.New("--operator-namespace (or $POD_NAMESPACE) is required: admin Secrets live there")
	}
	adminSecrets, err := featurestore.NewAdminSecretCache(mgr, opts.Namespace)
	if err != nil {
		return err
	}
	r, err := featurestore.NewReconciler(mgr, opts.Options, adminSecrets)
	if err != nil {
		return err
	}
	copts := cfg.ControllerOptions()
	if opts.Tune != nil {
		opts.Tune(r, &copts)
	}
	if err := r.SetupWithManager(mgr, copts); err != nil {
		return err
	}
	if err := featurestore.RegisterStoresCollector(mgr.GetClient()); err != nil {
		return err
	}
	pc := &pendingcleanup.Reconciler{
		Client:    mgr.GetClient(),
		Recorder:  mgr.GetEventRecorderFor("pendingcleanup-controller"),
		Backends:  r.Backends,
		Namespace: opts.Namespace,
		// One counter for both origins of a cleanup.
		CleanupFailures: r.CleanupFailures,
	}
	// The other controllers follow the FeatureStore controller's options
	// tuned for tests (name validation, so tests can start several
	// managers in one process).
	others := cfg.ControllerOptions()
	others.SkipNameValidation = copts.SkipNameValidation
	if err := pc.SetupWithManager(mgr, others); err != nil {
		return err
	}
	br := &featurestorebackend.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorderFor("featurestorebackend-controller"),
		Backends:      r.Backends,
		AdminSecrets:  adminSecrets,
		Namespace:     opts.Namespace,
		CheckInterval: opts.DriftInterval,
		PhaseMetrics:  r.PhaseMetrics,
	}
	if opts.TuneBackend != nil {
		opts.TuneBackend(br)
	}
	return br.SetupWithManager(mgr, others)
}
