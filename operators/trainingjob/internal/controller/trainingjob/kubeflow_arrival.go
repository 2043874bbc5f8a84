package trainingjob

import (
	"context"
	"strings"

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

// kubeflowArrivals follow each Kubeflow job kind's CRD (shared/crdarrival),
// one arrival per kind so that a kind that never comes (the MPI Operator's
// v2beta1 MPIJob where the training-operator's v1 is expected) holds up
// none of the others. A kind not served when the operator started is
// watched as the builder's Owns would once its CRD appears, and made
// available; a kind whose CRD is deleted while the operator runs (an
// administrator uninstalls the training-operator, and the API server
// deletes every job of the kind with it) is made unavailable until it
// comes back. Either way the unfinished jobs of the kind are woken: they
// are Stalled BackendUnavailable while their kind is away, and get a new
// child for their current run when it returns.
func (r *Reconciler) kubeflowArrivals() []*crdarrival.Arrival {
	be, _ := r.Backends.Get(trainingv1alpha1.BackendKubeflow)
	kf, ok := be.(*kubeflowjob.Backend)
	if !ok {
		return nil
	}
	missing := kf.Missing()
	var out []*crdarrival.Arrival
	for i, obj := range append(missing, kf.Served()...) {
		gvk, err := r.Client.GroupVersionKindFor(obj)
		if err != nil {
			continue // not in the scheme: nothing could watch it anyway
		}
		kind := gvk.Kind
		out = append(out, &crdarrival.Arrival{
			Name:    "kubeflow-" + strings.ToLower(kind),
			Kinds:   []client.Object{obj},
			Present: i >= len(missing),
			Watch: func(mgr ctrl.Manager, obj client.Object) source.Source {
				h := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &trainingv1alpha1.TrainingJob{}, handler.OnlyControllerOwner())
				return source.Kind(mgr.GetCache(), obj, h, r.childMatters())
			},
			Arrived: func(ctx context.Context) {
				kf.MarkInstalled(kind)
				ctrl.LoggerFrom(ctx).Info("A Kubeflow CRD appeared: the kubeflow backend runs its kind now", "kind", kind)
			},
			Departed: func(ctx context.Context) {
				kf.MarkMissing(kind, kubeflowDeparted(gvk))
				ctrl.LoggerFrom(ctx).Info("A Kubeflow CRD is no longer served: jobs of its kind wait, Stalled, until it is installed again", "kind", kind)
			},
			Waiting: r.unfinished(func(tj *trainingv1alpha1.TrainingJob) bool {
				return r.Backends.Of(tj) == trainingv1alpha1.BackendKubeflow && kf.JobKind(tj) == kind
			}),
		})
	}
	return out
}
