package kueue

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// gpuResource is the extended resource of the operator's default
// accelerator catalog (charts/trainingjob-operator values: accelerators).
const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// advertiseGPUs makes every node advertise n GPU-like devices, as a device
// plugin would: the node's status capacity, which the kubelet carries into
// allocatable at its next status update. Nothing runs on them; the
// scheduler and Kueue only count them. They are taken away after the test.
func advertiseGPUs(t *testing.T, e *steps.Env, n int) {
	t.Helper()
	nodes, err := e.CS.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.ReplaceAll(string(gpuResource), "/", "~1")
	for _, node := range nodes.Items {
		add := fmt.Appendf(nil, `[{"op":"add","path":"/status/capacity/%s","value":"%d"}]`, key, n)
		if _, err := e.CS.CoreV1().Nodes().Patch(t.Context(), node.Name, types.JSONPatchType, add, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("advertising %s on node %s: %v", gpuResource, node.Name, err)
		}
		t.Cleanup(func() {
			remove := fmt.Appendf(nil, `[{"op":"remove","path":"/status/capacity/%s"}]`, key)
			if _, err := e.CS.CoreV1().Nodes().Patch(context.Background(), node.Name, types.JSONPatchType, remove, metav1.PatchOptions{}, "status"); err != nil {
				t.Logf("taking %s away from node %s: %v", gpuResource, node.Name, err)
			}
		})
		steps.Until(t, fmt.Sprintf("node %s to have %d %s allocatable", node.Name, n, gpuResource), admitTimeout, func(ctx context.Context) (bool, error) {
			got, err := e.CS.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			q := got.Status.Allocatable[gpuResource]
			return q.Value() == int64(n), nil
		})
	}
}

// withGPU gives tj one GPU per pod, through the accelerator catalog.
func withGPU(tj *trainingv1alpha1.TrainingJob) *trainingv1alpha1.TrainingJob {
	tj.Spec.Resources.Accelerators = &commonv1alpha1.Accelerators{Count: 1}
	return tj
}

// podGPUs is what the running pod of tj requests of the GPU resource, and
// its node.
func podGPUs(t *testing.T, e *steps.Env, ns, pod string) (int64, string) {
	t.Helper()
	p, err := e.CS.CoreV1().Pods(ns).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Requests[gpuResource]
		n += q.Value()
	}
	return n, p.Spec.NodeName
}

var (
	mlpOnce sync.Once
	mlpBin  string
	mlpErr  error
)

// mlp builds the CLI once and runs it with args in ns against the cluster
// under test (KUBECONFIG from the environment, as for a user); it returns
// the combined output.
func mlp(t *testing.T, timeout time.Duration, ns string, args ...string) string {
	t.Helper()
	mlpOnce.Do(func() {
		dir, err := os.MkdirTemp("", "e2e-kueue-mlp-")
		if err != nil {
			mlpErr = err
			return
		}
		mlpBin = filepath.Join(dir, "mlp")
		build := exec.Command("go", "build", "-o", mlpBin, "./cmd/mlp")
		build.Dir = filepath.Join("..", "..", "tools", "mlp")
		if out, err := build.CombinedOutput(); err != nil {
			mlpErr = fmt.Errorf("building mlp: %w\n%s", err, out)
		}
	})
	if mlpErr != nil {
		t.Fatal(mlpErr)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(mlpBin)) })
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, mlpBin, append([]string{"-n", ns}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("mlp %v: %v\n%s", args, err, out.String())
	return out.String()
}

// TestGPUQuotaAndQueuePositionInMLP: the kind node advertises two GPU-like
// devices and the ClusterQueue's quota holds one. A TrainingJob asking for
// one GPU is admitted and its pod runs on the node with the device; a
// second, submitted with `mlp train submit --gpus 1`, waits for GPU quota
// and mlp shows its place: "Queued (position 1 in team-queue)" in describe,
// and 1 in the Position column of the list. Once the
// first job is deleted, the second gets the GPU.
func TestGPUQuotaAndQueuePositionInMLP(t *testing.T) {
	e := steps.Connect(t)
	requireKueue(t, e)
	advertiseGPUs(t, e, 2)
	ns := e.Namespace(t, "e2e-kueue-gpu")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	queue := createQueuesWith(t, e, ns, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), gpuResource: resource.MustParse("1"),
	})

	holder := withGPU(sleeper(ns, "holder", image, queue, ""))
	delete(holder.Labels, trainingv1alpha1.LabelKueuePriorityClass)
	create(t, e, holder)
	waitAdmitted(t, e, holder)
	pod := waitPodRunning(t, e, holder)
	if n, node := podGPUs(t, e, ns, pod); n != 1 || node == "" {
		t.Errorf("pod %s of %s requests %d %s on node %q, want 1 on a node", pod, holder.Name, n, gpuResource, node)
	}
	t.Logf("%s admitted with one GPU of the quota; pod %s runs on the node's advertised device", holder.Name, pod)

	// mlp follows the job it submitted until --timeout; the job waits on.
	out := mlp(t, 3*time.Minute, ns, "train", "submit", "waiter", "--image", image, "--gpus", "1", "--cpu", "150m", "--memory", "32Mi",
		"--queue", queue, "--timeout", "90s", "--", "sleep", "3600")
	want := "position 1 in " + queue
	if !strings.Contains(out, want) {
		t.Errorf("mlp train submit did not show %q:\n%s", want, out)
	}
	waiter := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waiter"}}
	c := waitQueued(t, e, waiter, "Waiting")
	if !strings.Contains(c.Message, "insufficient unused quota for "+string(gpuResource)) {
		t.Errorf("%s waits, but not for GPU quota: %s", waiter.Name, c.Message)
	}
	// The list is the API server's table: the place is the CRD's Position
	// printer column, beside the STATUS column.
	list := mlp(t, time.Minute, ns, "train", "list")
	if status, position := tableCell(list, "waiter", "STATUS"), tableCell(list, "waiter", "POSITION"); status != "Queued" || position != "1" {
		t.Errorf("mlp train list shows waiter as status %q, position %q; want Queued, 1:\n%s", status, position, list)
	}
	if out := mlp(t, time.Minute, ns, "train", "describe", "waiter"); !strings.Contains(out, "Queued ("+want+")") {
		t.Errorf("mlp train describe does not show Queued (%s):\n%s", want, out)
	}

	if err := e.C.Delete(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	waitAdmitted(t, e, waiter)
	pod = waitPodRunning(t, e, waiter)
	if n, _ := podGPUs(t, e, ns, pod); n != 1 {
		t.Errorf("pod %s of %s requests %d %s, want 1", pod, waiter.Name, n, gpuResource)
	}
	t.Logf("%s admitted once the GPU was freed; pod %s runs", waiter.Name, pod)
}

// resumeTrainSteps makes the preempted training last long enough to be
// preempted mid-way: 240 steps at 0.5 s, a checkpoint every 5 steps.
const resumeTrainSteps = 240

// preemptAfterStep is the step the training reports before it is
// preempted; a restart from scratch would report far below it after its
// re-admission.
const preemptAfterStep = 60

// TestPreemptedTrainingResumesFromItsCheckpoint: a real PyTorch training
// holding the queue's only GPU is preempted by a TrainingJob of a higher
// WorkloadPriorityClass. It goes back to Queued (Evicted), keeps its run
// and its checkpoint claim, and once re-admitted its training resumes from
// the last checkpoint: the first progress it reports after the
// re-admission (status.progress, from the training itself) is beyond the
// checkpoint it saved before the preemption, not a count from zero. It then
// succeeds in its first run, without a restart.
func TestPreemptedTrainingResumesFromItsCheckpoint(t *testing.T) {
	e := steps.Connect(t)
	requireKueue(t, e)
	advertiseGPUs(t, e, 2)
	ns := e.Namespace(t, "e2e-kueue-resume")
	queue := createQueuesWith(t, e, ns, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi"), gpuResource: resource.MustParse("1"),
	})
	low, high := createPriorityClass(t, e, ns+"-low", 10), createPriorityClass(t, e, ns+"-high", 1000)

	train := withGPU(&trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", Labels: map[string]string{trainingv1alpha1.LabelKueuePriorityClass: low}},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: "pytorch", Backend: "native", Image: steps.Image(t, "pytorch"), Workers: 1, QueueName: queue,
			Env: []corev1.EnvVar{
				{Name: "TRAIN_STEPS", Value: fmt.Sprint(resumeTrainSteps)}, {Name: "CHECKPOINT_EVERY", Value: "5"}, {Name: "STEP_SECONDS", Value: "0.5"},
			},
			Resources: &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}},
			Checkpoint: &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("64Mi")), DeletionPolicy: commonv1alpha1.DeletionPolicyDelete},
		},
	})
	create(t, e, train)
	waitAdmitted(t, e, train)
	first := waitPodRunning(t, e, train)
	var before int64
	steps.Until(t, fmt.Sprintf("%s to report step %d", train.Name, preemptAfterStep), trainTimeout, func(ctx context.Context) (bool, error) {
		if err := e.C.Get(ctx, client.ObjectKeyFromObject(train), train); err != nil {
			return false, err
		}
		if p := train.Status.Progress; p != nil {
			before = p.Step
		}
		return before >= preemptAfterStep, nil
	})
	claim := train.Status.CheckpointClaim
	if claim == "" {
		t.Fatalf("%s reports no checkpoint claim", train.Name)
	}
	t.Logf("%s at step %d on pod %s, checkpoint claim %s", train.Name, before, first, claim)

	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	urgent := withGPU(sleeper(ns, "urgent", image, queue, high))
	create(t, e, urgent)
	c := waitQueued(t, e, train, "Evicted")
	if !strings.Contains(c.Message, "Preempted") {
		t.Errorf("%s was evicted, but Kueue's reason is not a preemption: %s", train.Name, c.Message)
	}
	if err := e.C.Get(t.Context(), client.ObjectKeyFromObject(train), train); err != nil {
		t.Fatal(err)
	}
	if p := train.Status.Progress; p != nil {
		before = p.Step
	}
	// Checkpoints are every 5 steps: the last one saved is at most 5 below
	// the last step reported.
	saved := before - before%5
	t.Logf("%s preempted at step %d (last checkpoint step %d or later): %s", train.Name, before, saved, c.Message)
	waitAdmitted(t, e, urgent)
	waitPodRunning(t, e, urgent)

	if err := e.C.Delete(t.Context(), urgent); err != nil {
		t.Fatal(err)
	}
	waitAdmitted(t, e, train)
	readmitted := meta.FindStatusCondition(train.Status.Conditions, trainingv1alpha1.ConditionQueued).LastTransitionTime
	var resumed int64
	steps.Until(t, train.Name+" to report progress after its re-admission", trainTimeout, func(ctx context.Context) (bool, error) {
		if err := e.C.Get(ctx, client.ObjectKeyFromObject(train), train); err != nil {
			return false, err
		}
		p := train.Status.Progress
		if p == nil || !p.LastReportTime.After(readmitted.Time) {
			return false, nil
		}
		resumed = p.Step
		return true, nil
	})
	t.Logf("%s re-admitted at %s; first progress after it: step %d", train.Name, readmitted.UTC().Format(time.RFC3339), resumed)
	if resumed <= saved || saved <= 0 {
		t.Errorf("%s resumed at step %d after its preemption at step %d: want beyond the checkpoint of step %d, not from zero", train.Name, resumed, before, saved)
	}
	again := waitPodRunning(t, e, train)
	if again == first {
		t.Errorf("%s was preempted, yet its pod %s was never replaced", train.Name, first)
	}
	if mounted := claimOf(t, e, ns, again); mounted != claim {
		t.Errorf("the re-admitted pod %s mounts claim %q, want %s", again, mounted, claim)
	}

	e.WaitCondition(t, train, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
	if train.Status.Run != 1 || train.Status.RestartCount != 0 || train.Status.CheckpointClaim != claim {
		t.Errorf("%s finished on run %d with %d restarts and claim %s; a preemption is neither a new run nor a restart", train.Name, train.Status.Run, train.Status.RestartCount, train.Status.CheckpointClaim)
	}
	t.Logf("%s succeeded in run %d with %d restarts, on claim %s", train.Name, train.Status.Run, train.Status.RestartCount, claim)
}

// trainTimeout bounds a training's wait on the loaded kind node.
const trainTimeout = 10 * time.Minute

// claimOf is the persistent volume claim a pod mounts.
func claimOf(t *testing.T, e *steps.Env, ns, pod string) string {
	t.Helper()
	p, err := e.CS.CoreV1().Pods(ns).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// tableCell is the cell of a printed table (kubectl's layout: cells
// left-aligned under their column's name) in the row of name.
func tableCell(table, name, column string) string {
	lines := strings.Split(table, "\n")
	header := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "NAME ") {
			header = i
			break
		}
	}
	if header < 0 {
		return ""
	}
	start := strings.Index(lines[header], column)
	if start < 0 {
		return ""
	}
	for _, l := range lines[header+1:] {
		if f := strings.Fields(l); len(f) == 0 || f[0] != name || len(l) <= start {
			continue
		}
		// An empty cell is blank where the column starts; a cell ends
		// at the padding before the next column.
		cell, _, _ := strings.Cut(l[start:], "  ")
		return strings.TrimSpace(cell)
	}
	return ""
}
