package trainingjob

import (
	"context"
	"maps"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// CacheTransforms slim the operator's cached Jobs and pods, for
// shared/manager: a cluster with 20 000 TrainingJobs holds as many Jobs
// and their pods, and the operator reads little of them. It only creates a
// Job (never updates it: suspend and labels are patches of their own), and
// reads its metadata, spec.suspend, spec.parallelism and status. Of a pod
// it reads its own labels (and the Kubeflow training-operator's replica
// labels), the completion index, the owner and UID (the progress
// endpoint's authorization), the host name, subdomain, node and addresses
// (a rank's published name), the phase, reason and message, the
// DisruptionTarget condition and PodScheduled when it is False, each
// container's state, last termination and restart count, and each
// container's name, image and resources (the memory limit an OOM message
// names). The pods that succeeded are not in this cache at all
// (CacheFields, succeeded_pods.go). A rank NetworkPolicy, one per
// TrainingJob, holds its selectors once. A TrainingJob keeps everything
// but the copy of itself that kubectl apply leaves in an annotation, and
// once it finished, what only its runs' pods are built from
// (slimTrainingJob). Kueue's Workloads, cached cluster-wide, keep what
// the operator reads of them (slimWorkload).
func CacheTransforms() map[client.Object]toolscache.TransformFunc {
	return map[client.Object]toolscache.TransformFunc{
		&batchv1.Job{}: slimJob, &corev1.Pod{}: slimPod, &networkingv1.NetworkPolicy{}: shareSelectors,
		&trainingv1alpha1.TrainingJob{}: slimTrainingJob, newWorkload(): slimWorkload,
	}
}

// slimWorkload keeps of a Kueue Workload what the operator reads: its
// name, namespace and UID, the job-uid label it is listed by
// (kueue.WorkloadsOf), the resourceVersion, deletion and finalizers that
// releaseWorkload writes with, spec.active and spec.queueName, its
// conditions, and the TrainingJob label of its pod sets' templates that
// maps it to its TrainingJob (workloadToTrainingJob). The pod templates,
// which copy the child's, the admission and the resource usage go: a
// Workload is mostly its pod sets. releaseWorkload's patch is computed
// from the slim copy, so it names only the finalizers.
func slimWorkload(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	md, _ := u.Object["metadata"].(map[string]any)
	meta := map[string]any{}
	for _, k := range []string{"name", "namespace", "uid", "resourceVersion", "deletionTimestamp", "finalizers"} {
		if v, ok := md[k]; ok {
			meta[k] = v
		}
	}
	if uid := u.GetLabels()[kueue.JobUIDLabel]; uid != "" {
		meta["labels"] = map[string]any{kueue.JobUIDLabel: uid}
	}
	spec := map[string]any{}
	if active, found, _ := unstructured.NestedBool(u.Object, "spec", "active"); found {
		spec["active"] = active
	}
	if queue, _, _ := unstructured.NestedString(u.Object, "spec", "queueName"); queue != "" {
		spec["queueName"] = manager.Intern(queue)
	}
	if name := workloadToTrainingJob(context.Background(), u); len(name) > 0 {
		spec["podSets"] = []any{map[string]any{"template": map[string]any{"metadata": map[string]any{
			"labels": map[string]any{trainingv1alpha1.LabelJobName: name[0].Name},
		}}}}
	}
	u.Object = map[string]any{
		"apiVersion": u.Object["apiVersion"], "kind": u.Object["kind"], "metadata": meta, "spec": spec,
		"status": map[string]any{"conditions": slimWorkloadConditions(u)},
	}
	return u, nil
}

// slimWorkloadConditions are a Workload's conditions without their
// observedGeneration, sharing the repeated words.
func slimWorkloadConditions(u *unstructured.Unstructured) []any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := make([]any, 0, len(conds))
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		slim := map[string]any{}
		for _, k := range []string{"type", "status", "reason", "message", "lastTransitionTime"} {
			if s, ok := m[k].(string); ok {
				slim[k] = manager.Intern(s)
			}
		}
		out = append(out, slim)
	}
	return out
}

// slimTrainingJob drops kubectl's copy of the job (StripLastApplied) and,
// from a job that finished (Succeeded or Failed), the command, args,
// environment and pod template: a user's can be kilobytes, and they are
// read only to build a run's child (backend.PodTemplate, from createJob,
// which observeJob never allows for a finished job) and to validate it for
// a backend (resolveBackend, which skips finished jobs). Every other field
// stays: the checkpoint, run policy (TTL, clean pods), resources (the
// metrics' accelerators), queue, suspend and FeatureStores are read after
// the end too. The transform sees every version of the object whole, so a
// job whose status stops saying it finished is cached whole again; status
// writes patch status alone (shared/patch), so nothing is written back
// from the slim copy.
func slimTrainingJob(obj any) (any, error) {
	obj, err := manager.StripLastApplied(obj)
	if err != nil {
		return obj, err
	}
	if tj, ok := obj.(*trainingv1alpha1.TrainingJob); ok && finished(tj) {
		tj.Spec.Command, tj.Spec.Args, tj.Spec.Env, tj.Spec.Template = nil, nil, nil, nil
	}
	return obj, nil
}

// InternLabels are the labels of the operator's cached objects whose
// values repeat across them, for shared/manager.
func InternLabels() []string {
	return []string{
		trainingv1alpha1.LabelRun, trainingv1alpha1.LabelKueueQueueName, trainingv1alpha1.LabelKueuePriorityClass,
		progress.LabelKubeflowReplicaType, progress.LabelKubeflowReplicaIndex,
	}
}

// shareSelectors points the label selectors of a rank NetworkPolicy that
// match exactly its own labels (both of them: the policy selects the job's
// ranks and admits them) at the labels' map, so a cached policy holds one
// map instead of three. A cached object is never changed in place (reads
// get a deep copy, which copies each map), so the sharing stays inside the
// cache.
func shareSelectors(obj any) (any, error) {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		return obj, nil
	}
	share := func(sel *metav1.LabelSelector) {
		if sel != nil && len(sel.MatchExpressions) == 0 && len(sel.MatchLabels) > 0 && maps.Equal(sel.MatchLabels, np.Labels) {
			sel.MatchLabels = np.Labels
		}
	}
	share(&np.Spec.PodSelector)
	for i := range np.Spec.Ingress {
		for j := range np.Spec.Ingress[i].From {
			share(np.Spec.Ingress[i].From[j].PodSelector)
		}
	}
	return np, nil
}

func slimJob(obj any) (any, error) {
	if job, ok := obj.(*batchv1.Job); ok {
		// The ranks' subdomain names the Service whose slices package
		// rankdns writes for the run.
		template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Subdomain: manager.Intern(job.Spec.Template.Spec.Subdomain)}}
		job.Spec = batchv1.JobSpec{Suspend: job.Spec.Suspend, Parallelism: job.Spec.Parallelism, Template: template}
		job.Status.UncountedTerminatedPods = nil
		for i := range job.Status.Conditions {
			c := &job.Status.Conditions[i]
			c.Type, c.Reason = batchv1.JobConditionType(manager.Intern(string(c.Type))), manager.Intern(c.Reason)
			c.Status, c.Message = corev1.ConditionStatus(manager.Intern(string(c.Status))), manager.Intern(c.Message)
		}
	}
	return obj, nil
}

func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.GenerateName = ""
	pod.Labels = ownLabels(pod.Labels)
	if idx, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		pod.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: manager.Intern(idx)}
	} else {
		pod.Annotations = nil
	}
	spec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicy(manager.Intern(string(pod.Spec.RestartPolicy))),
		NodeName:      manager.Intern(pod.Spec.NodeName),
		Hostname:      pod.Spec.Hostname,
		Subdomain:     pod.Spec.Subdomain,
	}
	spec.InitContainers, spec.Containers = slimContainers(pod.Spec.InitContainers), slimContainers(pod.Spec.Containers)
	status := corev1.PodStatus{
		Phase:                 corev1.PodPhase(manager.Intern(string(pod.Status.Phase))),
		Reason:                manager.Intern(pod.Status.Reason),
		Message:               pod.Status.Message,
		Conditions:            readConditions(pod.Status.Conditions),
		PodIP:                 pod.Status.PodIP,
		InitContainerStatuses: slimStatuses(pod.Status.InitContainerStatuses),
		ContainerStatuses:     slimStatuses(pod.Status.ContainerStatuses),
	}
	if len(pod.Status.PodIPs) > 1 {
		// A dual-stack pod's second address; the first is PodIP.
		status.PodIPs = pod.Status.PodIPs
	}
	pod.Spec, pod.Status = spec, status
	return pod, nil
}

// ownLabels keeps the labels the operator reads or selects pods by: its
// own, the managed-by label of its cache, and the Kubeflow replica labels.
// The Job controller's (a UID twice, the Job's name twice) go.
func ownLabels(in map[string]string) map[string]string {
	// No size hint: the Job controller's labels make in 8 or more, and a
	// map sized for them is twice the size the few kept need.
	out := map[string]string{}
	for k, v := range in {
		if k == commonv1alpha1.LabelManagedBy || strings.HasPrefix(k, trainingv1alpha1.GroupVersion.Group+"/") || strings.HasPrefix(k, progress.LabelKubeflowPrefix) {
			out[k] = v
		}
	}
	return out
}

// readConditions keeps the pod conditions the operator reads: a
// disruption, and the scheduler's refusal.
func readConditions(in []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range in {
		if c.Type == corev1.DisruptionTarget || (c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse) {
			c.Type, c.Status, c.Reason = corev1.PodConditionType(manager.Intern(string(c.Type))), corev1.ConditionStatus(manager.Intern(string(c.Status))), manager.Intern(c.Reason)
			out = append(out, c)
		}
	}
	return out
}

func slimContainers(in []corev1.Container) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i, c := range in {
		out[i] = corev1.Container{Name: manager.Intern(c.Name), Image: manager.Intern(c.Image), Resources: c.Resources}
	}
	return out
}

func slimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = corev1.ContainerStatus{
			Name: manager.Intern(cs.Name), State: slimState(cs.State), LastTerminationState: slimState(cs.LastTerminationState),
			RestartCount: cs.RestartCount, Ready: cs.Ready, Started: cs.Started,
		}
	}
	return out
}

// slimState keeps a container state's reasons, messages, exit code and
// times, sharing the reasons' vocabulary.
func slimState(s corev1.ContainerState) corev1.ContainerState {
	if w := s.Waiting; w != nil {
		w.Reason = manager.Intern(w.Reason)
	}
	if t := s.Terminated; t != nil {
		t.Reason, t.ContainerID = manager.Intern(t.Reason), ""
	}
	return s
}
