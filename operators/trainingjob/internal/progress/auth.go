package progress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// Audience is the audience of the projected tokens training pods report
// with: the API group, so a token minted for this endpoint is useless to
// the API server and to any other service.
const Audience = "training.mlplatform.dev"

// The claims the API server adds to a TokenReview of a pod-bound token.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// The labels and annotation that say which rank a pod runs. The operator's
// pod cache keeps them (internal/controller/trainingjob's transforms).
const (
	annotationCompletionIndex = batchv1.JobCompletionIndexAnnotation
	// LabelKubeflowPrefix begins every label the Kubeflow training-operator
	// puts on its pods.
	LabelKubeflowPrefix       = "training.kubeflow.org/"
	LabelKubeflowReplicaType  = LabelKubeflowPrefix + "replica-type"
	LabelKubeflowReplicaIndex = LabelKubeflowPrefix + "replica-index"
)

// kubeflowGroup owns the Kubeflow job kinds a pod may belong to.
const kubeflowGroup = "kubeflow.org"

// authError is a refusal with its HTTP status and, for a refusal that
// passes, how long to wait.
type authError struct {
	status int
	msg    string
	retry  time.Duration
}

func (e *authError) Error() string { return e.msg }

func unauthorized(format string, a ...any) error {
	return &authError{status: 401, msg: fmt.Sprintf(format, a...)}
}

func forbidden(format string, a ...any) error {
	return &authError{status: 403, msg: fmt.Sprintf(format, a...)}
}

// Authorizer decides whether a bearer token may report for a TrainingJob.
type Authorizer struct {
	// Reviews reviews tokens, within a budget and with a cache.
	Reviews *tokenReviews
	// Reader reads pods, jobs and TrainingJobs, normally the manager's
	// cache (generated pods and jobs carry the operator's label).
	Reader client.Reader
	Scheme *runtime.Scheme
	// AllRanks admits every pod of the job, not only rank 0.
	AllRanks bool
}

// Caller is an authorized reporter.
type Caller struct {
	Pod types.NamespacedName
	Job types.UID
}

// Authorize reviews token and checks that the pod it is bound to belongs
// to the TrainingJob job and runs its rank 0. The pod is found from the
// API server's own claims, never from anything the caller says.
func (a *Authorizer) Authorize(ctx context.Context, token string, job types.NamespacedName) (Caller, error) {
	pod, err := a.Reviews.boundPod(ctx, token)
	if err != nil {
		return Caller{}, err
	}
	if pod.Namespace != job.Namespace {
		return Caller{}, forbidden("the token's pod is in namespace %s, not %s", pod.Namespace, job.Namespace)
	}
	live, err := a.pod(ctx, pod)
	if err != nil {
		return Caller{}, err
	}
	uid, err := a.owningTrainingJob(ctx, live, job)
	if err != nil {
		return Caller{}, err
	}
	if !a.AllRanks && !rankZero(live) {
		return Caller{}, forbidden("pod %s is not rank 0 of TrainingJob %s: only rank 0 reports progress", live.Name, job.Name)
	}
	return Caller{Pod: types.NamespacedName{Namespace: live.Namespace, Name: live.Name}, Job: uid}, nil
}

// boundPod is the pod the API server says a token is bound to.
type boundPod struct {
	Namespace, Name string
	UID             types.UID
}

// pod reads the token's pod and checks it is the very pod the token was
// bound to, not a later one of the same name.
func (a *Authorizer) pod(ctx context.Context, bound boundPod) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := a.Reader.Get(ctx, types.NamespacedName{Namespace: bound.Namespace, Name: bound.Name}, &pod)
	if apierrors.IsNotFound(err) {
		return nil, forbidden("pod %s is not a pod of a TrainingJob", bound.Name)
	}
	if err != nil {
		return nil, err
	}
	if pod.UID != bound.UID {
		return nil, forbidden("pod %s no longer exists", bound.Name)
	}
	return &pod, nil
}

// owningTrainingJob walks pod -> its Job or Kubeflow job -> TrainingJob by
// controller references and UIDs, and returns the TrainingJob's UID when
// it is job.
func (a *Authorizer) owningTrainingJob(ctx context.Context, pod *corev1.Pod, job types.NamespacedName) (types.UID, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || !runOwner(ref) {
		return "", forbidden("pod %s is not a pod of a TrainingJob", pod.Name)
	}
	run, err := a.object(ctx, ref, pod.Namespace)
	if err != nil {
		return "", err
	}
	tjRef := metav1.GetControllerOf(run)
	if tjRef == nil || tjRef.Kind != "TrainingJob" || tjRef.APIVersion != trainingv1alpha1.GroupVersion.String() {
		return "", forbidden("pod %s is not a pod of a TrainingJob", pod.Name)
	}
	if tjRef.Name != job.Name {
		return "", forbidden("pod %s belongs to TrainingJob %s, not %s", pod.Name, tjRef.Name, job.Name)
	}
	var tj trainingv1alpha1.TrainingJob
	if err := a.Reader.Get(ctx, job, &tj); err != nil {
		if apierrors.IsNotFound(err) {
			return "", forbidden("TrainingJob %s does not exist", job.Name)
		}
		return "", err
	}
	if tj.UID != tjRef.UID {
		return "", forbidden("pod %s belongs to an earlier TrainingJob named %s", pod.Name, job.Name)
	}
	return tj.UID, nil
}

// runOwner says whether ref is a kind that runs a TrainingJob's pods.
func runOwner(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	return (gv.Group == batchv1.GroupName && ref.Kind == "Job") || gv.Group == kubeflowGroup
}

// object reads the owner ref names, with its typed kind from the scheme so
// the read goes to the operator's label-restricted cache.
func (a *Authorizer) object(ctx context.Context, ref *metav1.OwnerReference, namespace string) (client.Object, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	o, err := a.Scheme.New(gvk)
	if err != nil {
		return nil, forbidden("pod's owner %s is not a kind this operator runs", gvk.Kind)
	}
	obj, ok := o.(client.Object)
	if !ok {
		return nil, errors.New("owner kind is not an object")
	}
	if err := a.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, forbidden("the pod's %s %s does not exist", ref.Kind, ref.Name)
		}
		return nil, err
	}
	if obj.GetUID() != ref.UID {
		return nil, forbidden("the pod's %s %s was replaced", ref.Kind, ref.Name)
	}
	return obj, nil
}

// rankZero says whether pod runs rank 0: completion index 0 of a native
// Indexed Job, the first Master or Chief of a Kubeflow job, the first
// Worker of a PaddleJob, which the kubeflow backend runs in collective
// mode with Workers only (worker 0 is PADDLE_MASTER), or the Launcher of
// an MPIJob, whose hostfile lists the launcher itself first, so that
// mpirun starts world rank 0 there. training-operator v1 gives the one
// launcher no replica index.
func rankZero(pod *corev1.Pod) bool {
	if idx, ok := pod.Annotations[annotationCompletionIndex]; ok {
		return idx == "0"
	}
	first := pod.Labels[LabelKubeflowReplicaIndex] == "0"
	owner := metav1.GetControllerOf(pod)
	switch strings.ToLower(pod.Labels[LabelKubeflowReplicaType]) {
	case "master", "chief":
		return first
	case "worker":
		return first && owner != nil && owner.Kind == "PaddleJob"
	case "launcher":
		return owner != nil && owner.Kind == "MPIJob"
	}
	return false
}
