package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/finalizer"
)

// storePollInterval is how often a job waiting for a FeatureStore looks
// again when the FeatureStore CRD was not installed at start, so no watch
// can wake it.
const storePollInterval = time.Minute

// Condition reasons for jobs that cannot be created.
const (
	ReasonJobNameConflict = "JobNameConflict"
)

// scope carries what the phases of one reconcile learn.
type scope struct {
	tj  *trainingv1alpha1.TrainingJob
	now time.Time
	// finished is true when the outcome was recorded before this
	// reconcile started: only then are pods cleaned and the TTL applied.
	finished bool
	run      int32
	jobName  string
	fw       kubeflowjob.Framework
	job      client.Object
	created  bool
	stores   *featureref.Resolution
	invalid  error
	reason   string
	pods     []corev1.Pod
}

func newScope(tj *trainingv1alpha1.TrainingJob, now time.Time) *scope {
	// Part 1 runs each TrainingJob once; the run index is already in the
	// child's name and in status so that restarts can add runs later.
	run := max(tj.Status.Run, 1)
	return &scope{
		tj:       tj,
		now:      now,
		finished: finished(tj),
		run:      run,
		jobName:  kubeflowjob.JobName(tj.Name, run),
	}
}

func (s *scope) observation() observation {
	o := observation{
		jobName:       s.jobName,
		run:           s.run,
		stores:        s.stores,
		invalid:       s.invalid,
		invalidReason: s.reason,
		pods:          s.pods,
		now:           s.now,
	}
	if fw, ok := kubeflowjob.Frameworks()[s.tj.Spec.Framework]; ok {
		o.kind = fw.Kind()
	}
	if s.job != nil {
		rp, st := s.fw.Parts(s.job)
		o.job = st
		o.jobSuspended = ptr.Deref(rp.Suspend, false)
	}
	return o
}

func finished(tj *trainingv1alpha1.TrainingJob) bool { return conditions.IsFinished(tj) }

// ensureJob observes the Kubeflow job of the current run and creates it
// when it is missing, once every referenced FeatureStore is Ready. A
// finished run's job is never recreated.
func (r *Reconciler) ensureJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	fw, ok := r.Frameworks[s.tj.Spec.Framework]
	if !ok {
		if !s.finished {
			s.invalid = fmt.Errorf("framework %s is not supported by this operator", s.tj.Spec.Framework)
			s.reason = ReasonFrameworkNotReady
		}
		return ctrl.Result{}, nil
	}
	s.fw = fw
	if s.finished {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKey{Namespace: s.tj.Namespace, Name: s.jobName}
	job := fw.Empty()
	err := r.Client.Get(ctx, key, job)
	if apierrors.IsNotFound(err) {
		// The cache sees only labelled jobs and may lag behind our own
		// create; one live read before creating keeps a job that lost its
		// label, or a foreign job under our name, from costing a failed
		// create on every reconcile.
		err = r.APIReader.Get(ctx, key, job)
	}
	switch {
	case err == nil:
		return ctrl.Result{}, r.adopt(ctx, s, job)
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}

	var stores []featureref.Store
	if len(s.tj.Spec.FeatureStores) > 0 {
		res, err := featureref.Resolve(ctx, r.Client, s.tj.Namespace, s.tj.Spec.FeatureStores)
		if err != nil {
			return ctrl.Result{}, err
		}
		s.stores = &res
		if !res.AllReady() {
			if !r.WatchesFeatureStores {
				return ctrl.Result{RequeueAfter: storePollInterval}, nil
			}
			return ctrl.Result{}, nil
		}
		stores = res.Ready
	}

	desired, err := kubeflowjob.Build(fw, s.tj, s.run, stores, r.Settings)
	if invalid := (*kubeflowjob.InvalidSpecError)(nil); errors.As(err, &invalid) {
		s.invalid, s.reason = invalid, commonv1alpha1.ReasonInvalidSpec
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if err := controllerutil.SetControllerReference(s.tj, desired, r.Client.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	err = r.Client.Create(ctx, desired)
	switch {
	case err == nil:
		s.job, s.created = desired, true
		return ctrl.Result{}, nil
	case apierrors.IsAlreadyExists(err):
		// Created in between by a concurrent reconcile or by somebody else.
		live := fw.Empty()
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.adopt(ctx, s, live)
	case finalizer.IsNamespaceTerminatingError(err):
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, fmt.Errorf("creating %s %s: %w", fw.Kind(), s.jobName, err)
	}
}

// adopt accepts an existing job as the run's job when this TrainingJob
// controls it, and restores the labels the operator's cache selects on.
func (r *Reconciler) adopt(ctx context.Context, s *scope, job client.Object) error {
	if !metav1.IsControlledBy(job, s.tj) {
		s.invalid = fmt.Errorf("%s %s already exists and does not belong to this TrainingJob; delete or rename it", s.fw.Kind(), s.jobName)
		s.reason = ReasonJobNameConflict
		return nil
	}
	s.job = job
	want := kubeflowjob.Labels(r.Settings.OperatorName, s.tj.Name, s.run)
	missing := false
	for k, v := range want {
		if job.GetLabels()[k] != v {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	base := job.DeepCopyObject().(client.Object)
	labels := job.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range want {
		labels[k] = v
	}
	job.SetLabels(labels)
	return r.Client.Patch(ctx, job, client.MergeFrom(base))
}

// convergeSuspend makes the job's runPolicy.suspend follow spec.suspend. It
// is the only field of the job the operator changes after creating it:
// everything else in the spec is immutable, and fields that admission
// webhooks or Kueue set on the job are left alone.
func (r *Reconciler) convergeSuspend(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job == nil || s.finished {
		return ctrl.Result{}, nil
	}
	rp, st := s.fw.Parts(s.job)
	if jobCondition(st, kubeflowv1.JobSucceeded) != nil || jobCondition(st, kubeflowv1.JobFailed) != nil {
		return ctrl.Result{}, nil
	}
	want := s.tj.Spec.Suspend
	if ptr.Deref(rp.Suspend, false) == want {
		return ctrl.Result{}, nil
	}
	p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"runPolicy":{"suspend":%t}}}`, want))
	if err := r.Client.Patch(ctx, s.job, p); err != nil {
		return ctrl.Result{}, fmt.Errorf("setting suspend=%t on %s %s: %w", want, s.fw.Kind(), s.jobName, err)
	}
	return ctrl.Result{}, nil
}

// runSelector selects the pods of the current run that the operator
// generated.
func (r *Reconciler) runSelector(s *scope) client.MatchingLabels {
	return client.MatchingLabels(kubeflowjob.Labels(r.Settings.OperatorName, s.tj.Name, s.run))
}

// observePods reads the run's pods from the cache, for the failure
// explanation, the re-emitted pod problems and the clean-pod policy.
func (r *Reconciler) observePods(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job == nil && !s.finished {
		return ctrl.Result{}, nil
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(s.tj.Namespace), r.runSelector(s)); err != nil {
		return ctrl.Result{}, err
	}
	s.pods = pods.Items
	return ctrl.Result{}, nil
}

// cleanPods applies the clean-pod policy once the outcome is recorded, so
// that a failed pod's termination message is in status before the pod goes.
// It writes only while matching pods exist, with one collection delete.
func (r *Reconciler) cleanPods(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !s.finished {
		return ctrl.Result{}, nil
	}
	policy := s.tj.Spec.RunPolicy.CleanPodPolicy
	if policy == "" {
		policy = trainingv1alpha1.CleanPodPolicyRunning
	}
	if policy == trainingv1alpha1.CleanPodPolicyNone {
		return ctrl.Result{}, nil
	}
	onlyUnfinished := policy == trainingv1alpha1.CleanPodPolicyRunning
	found := false
	for _, p := range s.pods {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if onlyUnfinished && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			continue
		}
		found = true
	}
	if !found {
		return ctrl.Result{}, nil
	}
	opts := []client.DeleteAllOfOption{client.InNamespace(s.tj.Namespace), r.runSelector(s)}
	if onlyUnfinished {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fields.AndSelectors(
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
		)})
	}
	if err := r.Client.DeleteAllOf(ctx, &corev1.Pod{}, opts...); err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting pods by clean-pod policy %s: %w", policy, err)
	}
	return ctrl.Result{}, nil
}

// expireTTL deletes a finished TrainingJob once ttlSecondsAfterFinished has
// passed since its terminal condition's lastTransitionTime. That time is
// persisted, so the deadline survives operator restarts.
func (r *Reconciler) expireTTL(ctx context.Context, tj *trainingv1alpha1.TrainingJob) (ctrl.Result, error) {
	expiry, ok := ttlExpiry(tj)
	if !ok {
		return ctrl.Result{}, nil
	}
	if wait := expiry.Sub(r.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	err := r.Client.Delete(ctx, tj, client.Preconditions{UID: &tj.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(tj, corev1.EventTypeNormal, "Expired", "Deleted %ds after it finished (ttlSecondsAfterFinished)", *tj.Spec.RunPolicy.TTLSecondsAfterFinished)
	return ctrl.Result{}, nil
}

// ttlExpiry is when a finished TrainingJob is due for deletion.
func ttlExpiry(tj *trainingv1alpha1.TrainingJob) (time.Time, bool) {
	ttl := tj.Spec.RunPolicy.TTLSecondsAfterFinished
	if ttl == nil {
		return time.Time{}, false
	}
	for _, t := range []string{commonv1alpha1.ConditionSucceeded, commonv1alpha1.ConditionFailed} {
		if c := conditions.Get(tj, t); c != nil && c.Status == metav1.ConditionTrue {
			return c.LastTransitionTime.Add(time.Duration(*ttl) * time.Second), true
		}
	}
	return time.Time{}, false
}
