package trainingjob

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// Pods that succeeded are most of a busy cluster's pods (12 000 of 16 000
// at 20 000 TrainingJobs in BenchmarkScale) and the operator reads nothing
// of them but that they exist, for the clean-pod policy All. So the
// manager's cache of pods leaves them out (CacheFields), and a cache of
// their metadata holds them: about a kilobyte a pod instead of two and a
// half, and none of the watch events of a pod after it succeeded (the Job
// controller's removal of its finalizer) decoded as a whole pod.
//
// What that changes, on purpose:
//   - A run's failure is explained by its pods that did not succeed
//     (internal/failure). A pod that succeeded explains no failure of its
//     run, even one that ran out of memory once and succeeded on its
//     container's restart: classifying the run as OOMKilled from it would
//     blame the user for a run whose failure was elsewhere. Only a pod
//     that succeeded while it was being deleted still counts, as a
//     deletion (deletingSucceeded).
//   - A pod that succeeds leaves the pods' cache with a deletion event
//     that carries its last state there (running, the API server's way
//     for an object that leaves a field selector). It wakes the
//     TrainingJob no more than its update to Succeeded did (podMatters),
//     and it unpublishes the rank (rankdns) as a deletion does.
//   - The progress endpoint finds no pod that succeeded, so it refuses a
//     report in its name: every container of such a pod has exited (the
//     client sends its last report before its process exits), and a
//     replayed token is all that could send one.

// podSucceeded selects the pods that succeeded.
var podSucceeded = fields.OneTermEqualSelector("status.phase", string(corev1.PodSucceeded))

// CacheFields restrict the operator's cache of pods to the pods that have
// not succeeded, for shared/manager (Options.Fields); the operator caches
// the metadata of the others on its own (cacheSucceededPods).
func CacheFields() map[client.Object]fields.Selector {
	return map[client.Object]fields.Selector{
		&corev1.Pod{}: fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	}
}

// podMetadata is a pod read as metadata only.
func podMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
}

// SlimSucceededPod is the transform of the cache of pods that succeeded:
// it keeps what the operator reads of such a pod, its name, its own labels
// (its run's, for the run index and the clean-pod policy), its deletion
// (deletingSucceeded), and its resource version.
func SlimSucceededPod(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	m.ObjectMeta = metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		ResourceVersion:   m.ResourceVersion,
		Labels:            ownLabels(m.Labels),
		DeletionTimestamp: m.DeletionTimestamp,

		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
	}
	return m, nil
}

// cacheSucceededPods builds the cache of the metadata of the operator's
// pods that succeeded, indexed by run, and returns the source that wakes a
// finished job whose clean-pod policy has such a pod to delete.
func (r *Reconciler) cacheSucceededPods(mgr ctrl.Manager) (source.Source, error) {
	c, err := manager.NewMetadataCache(mgr, manager.Options{Name: r.Settings.OperatorName, InternLabels: InternLabels()},
		r.Namespaces, podMetadata(), podSucceeded, SlimSucceededPod)
	if err != nil {
		return nil, err
	}
	if err := c.IndexField(context.Background(), podMetadata(), runPodsField, runOfPod); err != nil {
		return nil, err
	}
	r.succeededPods = c
	return source.Kind(c, podMetadata(), handler.TypedEnqueueRequestsFromMapFunc(r.toBeCleaned),
		predicate.TypedFuncs[*metav1.PartialObjectMetadata]{
			CreateFunc: func(ctrlevent.TypedCreateEvent[*metav1.PartialObjectMetadata]) bool { return true },
		}), nil
}

// toBeCleaned maps a pod that succeeded to its TrainingJob when that job,
// as cached, finished under the clean-pod policy All: its reconcile may
// have looked for the run's pods before this one reached the cache.
func (r *Reconciler) toBeCleaned(ctx context.Context, pod *metav1.PartialObjectMetadata) []reconcile.Request {
	return r.ownerWhen(ctx, pod, func(tj *trainingv1alpha1.TrainingJob) bool {
		return tj.Spec.RunPolicy.CleanPodPolicy == trainingv1alpha1.CleanPodPolicyAll && finished(tj)
	})
}

// deletingSucceeded are the pods of succeeded that were being deleted, as
// the failure explanation reads them: a rank deleted in the middle of a
// run whose program exits 0 on SIGTERM (checkpoints, then ends) succeeds,
// and its deletion is what ended the run (failure.deleted), until the
// kubelet removes it.
func deletingSucceeded(succeeded []metav1.PartialObjectMetadata) []corev1.Pod {
	var out []corev1.Pod
	for _, m := range succeeded {
		if !m.DeletionTimestamp.IsZero() {
			out = append(out, corev1.Pod{ObjectMeta: m.ObjectMeta, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}})
		}
	}
	return out
}

// succeededRunPods are the pods of a run of tj that succeeded and that the
// operator labelled, as metadata. A Reconciler that no manager set up (one
// called by hand) has no cache of them and reads them from the API server.
func (r *Reconciler) succeededRunPods(ctx context.Context, tj *trainingv1alpha1.TrainingJob, run int32) ([]metav1.PartialObjectMetadata, error) {
	pods := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	var err error
	if r.succeededPods != nil {
		err = r.succeededPods.List(ctx, pods, client.InNamespace(tj.Namespace), client.MatchingFields{runPodsField: runKey(tj.Name, strconv.Itoa(int(run)))})
	} else {
		err = r.APIReader.List(ctx, pods, client.InNamespace(tj.Namespace), r.runSelector(tj, run), client.MatchingFieldsSelector{Selector: podSucceeded})
	}
	if err != nil {
		return nil, err
	}
	return operatorsOnly(r, pods.Items), nil
}
