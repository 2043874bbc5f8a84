// Command trainingjob-operator runs TrainingJobs on Kubernetes' own Indexed
// Jobs (backend native) or on the Kubeflow training-operator (backend
// kubeflow, when the Kubeflow CRDs of PyTorchJob, TFJob, XGBoostJob and
// PaddleJob are installed; the chart's kubeflow.enabled installs them). The
// FeatureStore CRD is optional.
package main

import (
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/manager"
)

func main() {
	acceleratorConfig := accelerator.BindFlag(flag.CommandLine)
	shmSize := flag.String("default-shm-size", "1Gi", "The /dev/shm size of TrainingJobs that set none. \"0\" means bounded only by the pod's memory limit.")
	runAsUser := flag.Int64("run-as-user", 1000, "The non-root user id of generated pods.")
	progressOptions := progress.DefaultOptions()
	progressOptions.BindFlags(flag.CommandLine)
	rankNetworkPolicy := flag.Bool("rank-network-policy", true, "Give every TrainingJob a NetworkPolicy that admits to its ranks only the ranks of the same TrainingJob. false deletes the policies the operator made, for clusters without a NetworkPolicy engine or with policies of their own.")
	defaultBackend := flag.String("default-backend", string(trainingv1alpha1.BackendNative), "The backend of TrainingJobs that set no spec.backend: native or kubeflow. Recorded in each job's status.backend at its first reconcile, so changing it never moves existing jobs.")

	manager.Main(manager.Options{
		Name:                 trainingjob.OperatorName,
		AddToScheme:          trainingjob.AddToScheme,
		OwnedObjects:         trainingjob.OwnedObjects(),
		OptionalOwnedObjects: trainingjob.OptionalOwnedObjects(),
		Transforms:           trainingjob.CacheTransforms(),
		Fields:               trainingjob.CacheFields(),
		InternLabels:         trainingjob.InternLabels(),
		// Measured with `make bench-backends` (bench/backends/README.md):
		// under 20 submissions/s the shared defaults (50 QPS, one worker)
		// took 13 s (p50) and 22 s (p99) to create each job's child, 300
		// QPS and 8 workers 1.3 s and 4.6 s. With 200 jobs at once a
		// reconcile still waited 3.2 s for one of 8 workers, 1.1 s for one
		// of 32, while each takes about 0.2 s, mostly API round trips.
		Defaults: func(c *manager.Config) {
			c.KubeAPIQPS, c.KubeAPIBurst, c.MaxConcurrentReconciles = 300, 600, 32
		},
		Setup: func(mgr ctrl.Manager, cfg manager.Config) error {
			catalog, err := accelerator.Load(*acceleratorConfig)
			if err != nil {
				return err
			}
			size, err := resource.ParseQuantity(*shmSize)
			if err != nil {
				return fmt.Errorf("--default-shm-size: %w", err)
			}
			// The endpoint loads its Secret first: pods are built with
			// its CA, and follow it when the Secret changes.
			endpoint, err := progress.Setup(mgr, trainingjob.OperatorName, progressOptions)
			if err != nil {
				return err
			}
			r, err := trainingjob.NewReconciler(mgr, backend.Settings{
				OperatorName:     trainingjob.OperatorName,
				Catalog:          catalog,
				SharedMemorySize: size,
				RunAsUser:        *runAsUser,
				Progress:         endpoint,
			}, trainingv1alpha1.Backend(*defaultBackend))
			if err != nil {
				return fmt.Errorf("--default-backend: %w", err)
			}
			r.NetworkPolicy = *rankNetworkPolicy
			r.Namespaces = cfg.CacheNamespaces()
			return r.SetupWithManager(mgr, cfg.ControllerOptions())
		},
	})
}
