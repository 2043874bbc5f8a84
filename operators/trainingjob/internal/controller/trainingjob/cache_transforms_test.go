package trainingjob

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/failure"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
	"github.com/ml-platform/ml-platform/shared/kueue"
)

// TestCacheTransformsKeepWhatTheOperatorReads slims a Job and an OOM-killed
// pod as the cache does and checks that the Job's observed state and the
// pod's failure classification (which names the memory limit) are those of
// the whole objects, while the templates and environment are gone; that a
// pod keeps the labels, annotation, owner and container states the
// operator and its progress endpoint read, and the two conditions that
// make events and failure causes, and nothing else.
func TestCacheTransformsKeepWhatTheOperatorReads(t *testing.T) {
	transforms := CacheTransforms()
	slim := func(obj client.Object) client.Object {
		for proto, fn := range transforms {
			if reflect.TypeOf(proto) == reflect.TypeOf(obj) {
				out, err := fn(obj.DeepCopyObject())
				if err != nil {
					t.Fatal(err)
				}
				return out.(client.Object)
			}
		}
		t.Fatalf("no transform for %T", obj)
		return nil
	}
	container := corev1.Container{
		Name: "pytorch", Image: "train:1", Command: []string{"python"}, Env: []corev1.EnvVar{{Name: "MASTER_ADDR", Value: "job-0"}},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "job-r1", UID: "j1", Labels: map[string]string{trainingv1alpha1.LabelJobName: "job"}},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true), Parallelism: ptr.To[int32](4),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container}, Subdomain: rankdns.Service}},
		},
		Status: batchv1.JobStatus{Active: 2, Ready: ptr.To[int32](1), Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
		}},
	}
	job.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "c0ffee"}}
	be := nativejob.NewBackend(backend.Settings{})
	slimJob := slim(job).(*batchv1.Job)
	if got, want := be.Observe(slimJob), be.Observe(job); !reflect.DeepEqual(got, want) {
		t.Errorf("observed from the slim Job %+v, from the whole one %+v", got, want)
	}
	if len(slimJob.Spec.Template.Spec.Containers) != 0 || slimJob.Spec.Selector != nil || slimJob.Labels[trainingv1alpha1.LabelJobName] != "job" {
		t.Errorf("slim Job keeps its template or loses its labels: %+v", slimJob)
	}
	// Package rankdns finds the ranks' Service by their subdomain.
	if slimJob.Spec.Template.Spec.Subdomain != rankdns.Service {
		t.Errorf("slim Job's subdomain %q, want the ranks'", slimJob.Spec.Template.Spec.Subdomain)
	}

	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "job-r1-0", GenerateName: "job-r1-0-", UID: "u1",
			Labels: map[string]string{
				trainingv1alpha1.LabelJobName: "job", trainingv1alpha1.LabelRun: "1", commonv1alpha1.LabelManagedBy: OperatorName,
				progress.LabelKubeflowReplicaType: "master", progress.LabelKubeflowReplicaIndex: "0",
				batchv1.ControllerUidLabel: "c0ffee", batchv1.JobNameLabel: "job-r1", "team": "vision",
			},
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: "0", "note": "a user's"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job-r1", UID: "j1", Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{container}, Volumes: []corev1.Volume{{Name: "shm"}}, RestartPolicy: corev1.RestartPolicyNever},
		Status: corev1.PodStatus{
			Phase: corev1.PodFailed, PodIP: "10.0.0.7", QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted"},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "pytorch", Image: "train:1", ImageID: "sha256:abc", ContainerID: "containerd://1", RestartCount: 2,
				State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", ContainerID: "containerd://1"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
			}},
		},
	}
	slimPod := slim(&pod).(*corev1.Pod)
	if got, want := failure.Classify([]corev1.Pod{*slimPod}), failure.Classify([]corev1.Pod{pod}); got != want {
		t.Errorf("classified from the slim pod %+v, from the whole one %+v", got, want)
	}
	if c := slimPod.Spec.Containers[0]; len(c.Env) != 0 || len(c.Command) != 0 || len(slimPod.Spec.Volumes) != 0 || c.Name != "pytorch" {
		t.Errorf("slim pod keeps what nothing reads, or loses its container's name: %+v", slimPod.Spec)
	}
	wantLabels := map[string]string{
		trainingv1alpha1.LabelJobName: "job", trainingv1alpha1.LabelRun: "1", commonv1alpha1.LabelManagedBy: OperatorName,
		progress.LabelKubeflowReplicaType: "master", progress.LabelKubeflowReplicaIndex: "0",
	}
	if !reflect.DeepEqual(slimPod.Labels, wantLabels) || !reflect.DeepEqual(slimPod.Annotations, map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}) {
		t.Errorf("slim pod's labels %v and annotations %v, want the operator's and Kubeflow's labels and the completion index", slimPod.Labels, slimPod.Annotations)
	}
	if !reflect.DeepEqual(slimPod.OwnerReferences, pod.OwnerReferences) || slimPod.UID != pod.UID {
		t.Errorf("slim pod lost its owner or UID (the progress endpoint's authorization reads them): %+v", slimPod.ObjectMeta)
	}
	if cs := slimPod.Status.ContainerStatuses[0]; cs.RestartCount != 2 || cs.LastTerminationState.Terminated == nil || cs.Image != "" || cs.ImageID != "" {
		t.Errorf("slim container status %+v: want its restarts and last termination, no image", cs)
	}
	if len(slimPod.Status.Conditions) != 0 || slimPod.Status.QOSClass != "" {
		t.Errorf("slim pod keeps conditions or a QoS class nothing reads: %+v", slimPod.Status)
	}
	// A running rank's published name and address come out the same.
	svc := rankdns.NewService("", OperatorName)
	rank := pod.DeepCopy()
	rank.Spec.Hostname, rank.Spec.Subdomain, rank.Spec.NodeName = "job-r1-0", rankdns.Service, "node-1"
	rank.Status.Phase = corev1.PodRunning
	rank.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}}
	slimRank := slim(rank).(*corev1.Pod)
	for _, family := range []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol} {
		svc.Spec.IPFamilies = []corev1.IPFamily{family}
		got, want := rankdns.Desired(svc, slimJob, []corev1.Pod{*slimRank}), rankdns.Desired(svc, job, []corev1.Pod{*rank})
		if len(want) != 1 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: rank slices from the slim pod %+v, from the whole one %+v", family, got, want)
		}
	}

	// The pod conditions the operator reads: what the scheduler and the
	// control plane say of a pod, as events and failure causes.
	for _, c := range []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler},
	} {
		p := pod.DeepCopy()
		p.Status.Conditions = append(p.Status.Conditions, c)
		p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
		sp := slim(p).(*corev1.Pod)
		if got, want := issueKeys(sp), issueKeys(p); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: issues of the slim pod %v, of the whole one %v", c.Type, got, want)
		}
		if got, want := failure.Classify([]corev1.Pod{*sp}), failure.Classify([]corev1.Pod{*p}); got != want {
			t.Errorf("%s: classified from the slim pod %+v, from the whole one %+v", c.Type, got, want)
		}
		if len(sp.Status.Conditions) != 1 || sp.Status.Conditions[0] != c {
			t.Errorf("%s: slim pod's conditions %+v, want only %+v", c.Type, sp.Status.Conditions, c)
		}
	}
}

// TestCachedRankPolicyHoldsItsSelectorsOnce: the selectors of a rank
// NetworkPolicy that repeat its labels share the labels' map in the cache,
// a copy read from the cache has maps of its own, and a selector that says
// something else keeps its own.
func TestCachedRankPolicyHoldsItsSelectorsOnce(t *testing.T) {
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job"}}
	np := backend.NetworkPolicy(OperatorName, tj)
	np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "monitor"}}},
		{NamespaceSelector: &metav1.LabelSelector{}},
	}})
	want := np.DeepCopy()
	got, err := shareSelectors(np)
	if err != nil {
		t.Fatal(err)
	}
	cached := got.(*networkingv1.NetworkPolicy)
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	if !same(cached.Spec.PodSelector.MatchLabels, cached.Labels) || !same(cached.Spec.Ingress[0].From[0].PodSelector.MatchLabels, cached.Labels) {
		t.Error("the selectors that repeat the labels hold maps of their own")
	}
	if same(cached.Spec.Ingress[1].From[0].PodSelector.MatchLabels, cached.Labels) {
		t.Error("a selector that says something else was replaced by the labels")
	}
	if !reflect.DeepEqual(cached, want) {
		t.Errorf("the cached policy says something else than the policy:\n%+v\n%+v", cached, want)
	}
	read := cached.DeepCopy()
	if same(read.Spec.PodSelector.MatchLabels, read.Labels) {
		t.Error("a copy read from the cache shares a map")
	}
}

// TestCachedPodThatSucceededKeepsItsRunOnly: the metadata of a pod that
// succeeded is cached with its name, its run's labels, its deletion and
// resource version, and nothing else; its run index is the run's.
func TestCachedPodThatSucceededKeepsItsRunOnly(t *testing.T) {
	deleted := metav1.Now()
	pod := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "job-r1-1-x7k2p", GenerateName: "job-r1-1-", Namespace: "team", UID: "u1", ResourceVersion: "42",
			CreationTimestamp: metav1.Now(), DeletionTimestamp: &deleted,
			Labels: map[string]string{
				trainingv1alpha1.LabelJobName: "job", trainingv1alpha1.LabelRun: "1", commonv1alpha1.LabelManagedBy: OperatorName,
				"batch.kubernetes.io/controller-uid": "j1", "batch.kubernetes.io/job-name": "job-r1",
			},
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job-r1", UID: "j1", Controller: ptr.To(true)}},
			Finalizers:      []string{"batch.kubernetes.io/job-tracking"},
		},
	}
	out, err := SlimSucceededPod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := &metav1.PartialObjectMetadata{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: "team", ResourceVersion: "42", DeletionTimestamp: &deleted,
			Labels: map[string]string{trainingv1alpha1.LabelJobName: "job", trainingv1alpha1.LabelRun: "1", commonv1alpha1.LabelManagedBy: OperatorName},
		},
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("the cached metadata of a pod that succeeded (-want +got):\n%s", diff)
	}
	if got := runOfPod(out.(*metav1.PartialObjectMetadata)); !reflect.DeepEqual(got, []string{"job/1"}) {
		t.Errorf("run index %v, want [job/1]", got)
	}
}

// TestCachedFinishedTrainingJobKeepsNoPodTemplate: a TrainingJob that
// succeeded or failed is cached without its command, args, environment
// and pod template, and with everything else; a queued, running or
// restarting one is cached whole. kubectl's copy of the job goes either
// way.
func TestCachedFinishedTrainingJobKeepsNoPodTemplate(t *testing.T) {
	user := func(status ...metav1.Condition) *trainingv1alpha1.TrainingJob {
		return &trainingv1alpha1.TrainingJob{
			ObjectMeta: metav1.ObjectMeta{Name: "sweep", Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "team": "vision"}},
			Spec: trainingv1alpha1.TrainingJobSpec{
				Framework: trainingv1alpha1.FrameworkPyTorch, Image: "train:1", Workers: 4, QueueName: "team",
				Command: []string{"torchrun", "train.py"}, Args: []string{"--lr=0.1"}, WorkingDir: "/work",
				Env:        []corev1.EnvVar{{Name: "SEED", Value: "7"}},
				Template:   &trainingv1alpha1.PodTemplatePatch{Labels: map[string]string{"team": "vision"}},
				Resources:  &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 1}},
				RunPolicy:  trainingv1alpha1.RunPolicy{TTLSecondsAfterFinished: ptr.To[int32](60), CleanPodPolicy: trainingv1alpha1.CleanPodPolicyAll},
				Checkpoint: &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi"))},
			},
			Status: trainingv1alpha1.TrainingJobStatus{Conditions: status},
		}
	}
	cond := func(t string) metav1.Condition { return metav1.Condition{Type: t, Status: metav1.ConditionTrue} }
	var slim toolscache.TransformFunc
	for proto, fn := range CacheTransforms() {
		if _, ok := proto.(*trainingv1alpha1.TrainingJob); ok {
			slim = fn
		}
	}
	for name, tc := range map[string]struct {
		in       *trainingv1alpha1.TrainingJob
		finished bool
	}{
		"queued":     {user(), false},
		"running":    {user(cond(trainingv1alpha1.ConditionRunning)), false},
		"restarting": {user(cond(trainingv1alpha1.ConditionRestarting)), false},
		"succeeded":  {user(cond(commonv1alpha1.ConditionSucceeded), cond(trainingv1alpha1.ConditionFinished)), true},
		"failed":     {user(cond(commonv1alpha1.ConditionFailed), cond(trainingv1alpha1.ConditionFinished)), true},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := slim(tc.in.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*trainingv1alpha1.TrainingJob)
			want := tc.in.DeepCopy()
			want.Annotations = map[string]string{"team": "vision"}
			if tc.finished {
				want.Spec.Command, want.Spec.Args, want.Spec.Env, want.Spec.Template = nil, nil, nil, nil
			}
			if !reflect.DeepEqual(want, got) {
				t.Errorf("cached %+v\nwant   %+v", got, want)
			}
		})
	}
}

// TestCachedWorkloadKeepsWhatTheOperatorReads slims a Workload of Kueue's
// as the cache does: what the operator reads of it (the job-uid label it
// is listed by, the finalizer and resourceVersion releaseWorkloads
// writes with, spec.active and spec.queueName, the conditions, the
// TrainingJob label of the pod template) reads the same, and the pod
// template, admission and resource requests are gone.
func TestCachedWorkloadKeepsWhatTheOperatorReads(t *testing.T) {
	wl := childWorkload(false,
		[4]string{"QuotaReserved", "False", "Pending", "insufficient quota"},
		[4]string{"Evicted", "True", "Deactivated", "The workload is deactivated"})
	wl.SetFinalizers([]string{kueue.ResourceInUseFinalizer})
	wl.SetResourceVersion("42")
	wl.SetAnnotations(map[string]string{kueue.JobOwnerNameAnnotation: "mnist-r1"})
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2026-11-28T15:24:30Z"})
	_ = unstructured.SetNestedSlice(wl.Object, conds, "status", "conditions")
	_ = unstructured.SetNestedSlice(wl.Object, []any{
		map[string]any{"name": "launcher", "count": int64(1), "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "l"}}}}},
		map[string]any{"name": "main", "count": int64(4), "template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{trainingv1alpha1.LabelJobName: "mnist", "team": "vision"}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "pytorch", "image": "train:1", "env": []any{map[string]any{"name": "A", "value": "b"}}}}},
		}},
	}, "spec", "podSets")
	_ = unstructured.SetNestedField(wl.Object, map[string]any{"clusterQueue": "team"}, "status", "admission")

	var fn toolscache.TransformFunc
	for proto, f := range CacheTransforms() {
		if u, ok := proto.(*unstructured.Unstructured); ok && u.GroupVersionKind() == kueue.WorkloadGVK {
			fn = f
		}
	}
	if fn == nil {
		t.Fatal("no cache transform for Workloads")
	}
	out, err := fn(wl.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*unstructured.Unstructured)

	read := func(u *unstructured.Unstructured) []any {
		var q queueObservation
		q.readVerdict(u)
		queue, _, _ := unstructured.NestedString(u.Object, "spec", "queueName")
		return []any{
			u.GetName(), u.GetNamespace(), u.GetUID(), u.GetResourceVersion(), u.GetLabels(), u.GetFinalizers(), queue,
			waitMessage(u), conditionTime(u, "Admitted"), conditionStatus(u, "QuotaReserved"), q, workloadToTrainingJob(t.Context(), u),
		}
	}
	if diff := cmp.Diff(read(wl), read(slim), cmp.AllowUnexported(queueObservation{})); diff != "" {
		t.Errorf("the slim Workload reads differently (-whole +slim):\n%s", diff)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(slim.Object, "status", "admission"); found {
		t.Errorf("the slim Workload keeps its admission")
	}
	podSets, _, _ := unstructured.NestedSlice(slim.Object, "spec", "podSets")
	if len(podSets) != 1 || fmt.Sprint(podSets[0]) != fmt.Sprint(map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{trainingv1alpha1.LabelJobName: "mnist"}}}}) {
		t.Errorf("the slim Workload's pod sets: %v", podSets)
	}
	if slim.GetAnnotations() != nil {
		t.Errorf("the slim Workload keeps annotations %v", slim.GetAnnotations())
	}
}
