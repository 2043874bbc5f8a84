package trainingjob

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/shared/crdarrival"
)

// unfinished lists the unfinished TrainingJobs that match: those that
// waited for kinds whose CRDs appeared.
func (r *Reconciler) unfinished(match func(*trainingv1alpha1.TrainingJob) bool) func(context.Context) ([]client.Object, error) {
	return func(ctx context.Context) ([]client.Object, error) {
		list := &trainingv1alpha1.TrainingJobList{}
		if err := r.Client.List(ctx, list); err != nil {
			return nil, err
		}
		var out []client.Object
		for i := range list.Items {
			if tj := &list.Items[i]; !finished(tj) && match(tj) {
				out = append(out, tj)
			}
		}
		return out, nil
	}
}

// The Kubeflow CRDs may be installed after the operator started (the
// chart's kubeflow.enabled turned on in a running platform).
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// kubeflowArrival, for an operator that started without the Kubeflow
// CRDs, starts the kubeflow backend when they appear (shared/crdarrival):
// it watches the Kubeflow kinds as the builder's Owns would, makes the
// backend available and wakes the jobs on it, which were Stalled.
func (r *Reconciler) kubeflowArrival() *crdarrival.Arrival {
	be, ok := r.Backends.Get(trainingv1alpha1.BackendKubeflow)
	kf, isKF := be.(*kubeflowjob.Backend)
	if !ok || !isKF || kf.Available() == nil {
		return nil
	}
	return &crdarrival.Arrival{
		Name:  "kubeflow",
		Kinds: kf.Owned(),
		Watch: func(mgr ctrl.Manager, obj client.Object) source.Source {
			h := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &trainingv1alpha1.TrainingJob{}, handler.OnlyControllerOwner())
			return source.Kind(mgr.GetCache(), obj, h, r.childMatters())
		},
		Arrived: func(ctx context.Context) {
			kf.MarkInstalled()
			ctrl.LoggerFrom(ctx).Info("The Kubeflow CRDs appeared: the kubeflow backend runs now")
		},
		Waiting: r.unfinished(func(tj *trainingv1alpha1.TrainingJob) bool {
			return r.Backends.Of(tj) == trainingv1alpha1.BackendKubeflow
		}),
	}
}
