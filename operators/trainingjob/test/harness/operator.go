package harness

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

// OperatorName is the operator's name.
const OperatorName = trainingjob.OperatorName

// Scheme knows every kind the operator and its tests use.
func Scheme() *runtime.Scheme {
	s, err := manager.NewScheme(trainingjob.AddToScheme...)
	if err != nil {
		// Only a programming error (two kinds under one name) fails it,
		// and a test harness cannot run without it.
		panic(err)
	}
	return s
}

// Settings are the translation settings tests run with.
func Settings() backend.Settings {
	return backend.Settings{
		OperatorName:     OperatorName,
		Catalog:          accelerator.Default(),
		SharedMemorySize: resource.MustParse("1Gi"),
		RunAsUser:        1000,
	}
}

// Operator is a running manager with the TrainingJob reconciler.
type Operator struct {
	Reconciler *trainingjob.Reconciler
	Writes     *testenv.WriteCounter
	op         *operatortest.Operator
}

// Options tune a started operator.
type Options struct {
	// QPS and Burst of its API client; zero keeps shared/manager's defaults.
	QPS   float64
	Burst int
	// Concurrency is the number of parallel reconciles; zero means one.
	Concurrency int
	// DefaultBackend is the backend of TrainingJobs that name none; empty
	// means native, the operator's default.
	DefaultBackend trainingv1alpha1.Backend
	// Wrap wraps the reconciler, e.g. to time each reconcile.
	Wrap func(reconcile.Reconciler) reconcile.Reconciler
	// QueuePositionRefresh is how often queued jobs read their position
	// again; zero keeps the operator's default.
	QueuePositionRefresh time.Duration
	// WorkloadGrace is how long a queued child may go without a Kueue
	// Workload before its job is Stalled; zero keeps the default.
	WorkloadGrace time.Duration
	// PriorityQueue gives the controller controller-runtime's priority
	// queue (the operator's --priority-queue).
	PriorityQueue bool
}

// StartOperator starts the operator against cfg, counting its writes.
func StartOperator(cfg *rest.Config, scheme *runtime.Scheme, opts Options) (*Operator, error) {
	def := opts.DefaultBackend
	if def == "" {
		def = trainingv1alpha1.BackendNative
	}
	started, r, err := operatortest.RunController(operatortest.Options{
		RESTConfig: cfg,
		Tune: func(mc *manager.Config) {
			if opts.QPS > 0 {
				mc.KubeAPIQPS, mc.KubeAPIBurst = opts.QPS, opts.Burst
			}
			mc.PriorityQueue = opts.PriorityQueue
		},
		Manager: manager.Options{
			Name:                 OperatorName,
			Scheme:               scheme,
			OwnedObjects:         trainingjob.OwnedObjects(),
			OptionalOwnedObjects: trainingjob.OptionalOwnedObjects(),
			Transforms:           trainingjob.CacheTransforms(),
			Fields:               trainingjob.CacheFields(),
			InternLabels:         trainingjob.InternLabels(),
		},
	}, operatortest.Controller[*trainingjob.Reconciler]{
		Build: func(mgr ctrl.Manager, _ manager.Config) (*trainingjob.Reconciler, error) {
			return trainingjob.NewReconciler(mgr, Settings(), def)
		},
		Register: func(mgr ctrl.Manager, r *trainingjob.Reconciler, co controller.Options) error {
			co.MaxConcurrentReconciles = max(opts.Concurrency, 1)
			if opts.QueuePositionRefresh > 0 {
				r.QueuePositionRefresh = opts.QueuePositionRefresh
			}
			r.WorkloadGrace = opts.WorkloadGrace
			var do reconcile.Reconciler = r
			if opts.Wrap != nil {
				do = opts.Wrap(do)
			}
			return r.SetupWithManagerAs(mgr, co, do)
		},
	})
	if err != nil {
		return nil, err
	}
	return &Operator{Reconciler: r, Writes: started.Writes, op: started}, nil
}

// Stop stops the operator and waits for it.
func (op *Operator) Stop() error { return op.op.Shutdown() }
