package trainingjob

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
)

// kubeflowArrival, for an operator that started without the Kubeflow
// CRDs, starts the kubeflow backend when they appear (crd_arrival.go): it
// watches the Kubeflow kinds as the builder's Owns would, makes the
// backend available and wakes the jobs on it, which were Stalled.
func (r *Reconciler) kubeflowArrival() *crdArrival {
	be, ok := r.Backends.Get(trainingv1alpha1.BackendKubeflow)
	kf, isKF := be.(*kubeflowjob.Backend)
	if !ok || !isKF || kf.Available() == nil {
		return nil
	}
	return &crdArrival{
		r:     r,
		name:  "kubeflow",
		kinds: kf.Owned(),
		watch: func(mgr ctrl.Manager, obj client.Object) source.Source {
			h := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &trainingv1alpha1.TrainingJob{}, handler.OnlyControllerOwner())
			return source.Kind(mgr.GetCache(), obj, h, r.childMatters())
		},
		arrived: func(ctx context.Context) {
			kf.MarkInstalled()
			ctrl.LoggerFrom(ctx).Info("The Kubeflow CRDs appeared: the kubeflow backend runs now")
		},
		wakes: func(tj *trainingv1alpha1.TrainingJob) bool {
			return r.Backends.Of(tj) == trainingv1alpha1.BackendKubeflow
		},
	}
}
