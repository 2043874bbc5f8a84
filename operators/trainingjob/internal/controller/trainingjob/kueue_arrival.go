package trainingjob

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/crdarrival"
)

// kueueArrival, for an operator that started without Kueue's Workload
// CRD, starts watching Workloads when it appears (shared/crdarrival): queued
// jobs then show Kueue's reason for their wait and their place in the
// queue, as in an operator started after Kueue.
func (r *Reconciler) kueueArrival() *crdarrival.Arrival {
	if r.WatchesWorkloads {
		return nil
	}
	return &crdarrival.Arrival{
		Name:  "kueue",
		Kinds: []client.Object{newWorkload()},
		Watch: func(mgr ctrl.Manager, obj client.Object) source.Source {
			return source.Kind(mgr.GetCache(), obj, handler.EnqueueRequestsFromMapFunc(workloadToTrainingJob))
		},
		Arrived: func(ctx context.Context) {
			r.workloadsArrived.Store(true)
			ctrl.LoggerFrom(ctx).Info("Kueue's Workload CRD appeared: queued jobs show Kueue's reason and position now")
		},
		Waiting: r.unfinished(func(tj *trainingv1alpha1.TrainingJob) bool { return tj.Spec.QueueName != "" }),
	}
}

// watchesWorkloads is true when Kueue's Workloads are watched: their CRD
// was installed at start, or appeared since.
func (r *Reconciler) watchesWorkloads() bool {
	return r.WatchesWorkloads || r.workloadsArrived.Load()
}
