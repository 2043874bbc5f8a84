// Command trainingjob-operator runs TrainingJobs on the Kubeflow
// training-operator. The Kubeflow CRDs of PyTorchJob, TFJob, XGBoostJob and
// PaddleJob must be installed (the chart's kubeflow.enabled installs them);
// the FeatureStore CRD is optional.
package main

import (
	"flag"
	"fmt"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// name is the binary's name: the lease, the field manager and the value of
// app.kubernetes.io/managed-by on everything it creates.
const name = "trainingjob-operator"

func main() {
	acceleratorConfig := flag.String("accelerator-config", "", "A YAML file with the accelerator catalog (shared/accelerator). Empty means one type, \"gpu\", for nvidia.com/gpu.")
	shmSize := flag.String("default-shm-size", "1Gi", "The /dev/shm size of TrainingJobs that set none. \"0\" means bounded only by the pod's memory limit.")
	runAsUser := flag.Int64("run-as-user", 1000, "The non-root user id of generated pods.")

	scheme := runtime.NewScheme()
	must(clientgoscheme.AddToScheme(scheme))
	must(trainingv1alpha1.AddToScheme(scheme))
	must(kubeflowv1.AddToScheme(scheme))

	var owned []client.Object
	owned = append(owned, &corev1.Pod{}, &corev1.PersistentVolumeClaim{})
	for _, fw := range kubeflowjob.Frameworks() {
		owned = append(owned, fw.Empty())
	}

	manager.Main(manager.Options{
		Name:         name,
		Scheme:       scheme,
		OwnedObjects: owned,
		Setup: func(mgr ctrl.Manager, cfg manager.Config) error {
			catalog, err := accelerator.Load(*acceleratorConfig)
			if err != nil {
				return err
			}
			size, err := resource.ParseQuantity(*shmSize)
			if err != nil {
				return fmt.Errorf("--default-shm-size: %w", err)
			}
			r := trainingjob.NewReconciler(mgr, backend.Settings{
				OperatorName:     name,
				Catalog:          catalog,
				SharedMemorySize: size,
				RunAsUser:        *runAsUser,
			})
			return r.SetupWithManager(mgr, cfg.ControllerOptions())
		},
	})
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
