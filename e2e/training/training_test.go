package training

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// BackendsEnv lists the training backends to test, comma-separated.
const BackendsEnv = "ML_PLATFORM_E2E_TRAINING_BACKENDS"

// Bounds, not expectations: importing torch alone takes a while on two
// shared cores.
const (
	trainTimeout = 20 * time.Minute
	ttlTimeout   = 5 * time.Minute
)

func backends() []string {
	if v := os.Getenv(BackendsEnv); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"native"}
}

// forEachBackend runs test once per backend, in its own namespace. The
// backends run side by side: they share nothing but the cluster, and the
// nightly's training suite, which spent most of its time waiting on one
// training at a time, is its longest.
func forEachBackend(t *testing.T, test func(t *testing.T, e *steps.Env, ns, backend string)) {
	for _, b := range backends() {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			e := steps.Connect(t)
			test(t, e, e.Namespace(t, "e2e-training"), b)
		})
	}
}

// newJob is the DDP sample of deploy/samples (two pods, a checkpoint
// volume) with env added.
func newJob(t *testing.T, ns, name string, env map[string]string) *trainingv1alpha1.TrainingJob {
	tj := &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: "pytorch",
			Image:     steps.Image(t, "pytorch"),
			Workers:   2,
			Resources: &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}},
			Checkpoint: &trainingv1alpha1.Checkpoint{
				Size: ptr.To(resource.MustParse("64Mi")), DeletionPolicy: commonv1alpha1.DeletionPolicyDelete,
				RestartBackoffSeconds: ptr.To[int32](1),
			},
			RunPolicy: trainingv1alpha1.RunPolicy{CleanPodPolicy: "None"},
		},
	}
	for k, v := range env {
		tj.Spec.Env = append(tj.Spec.Env, corev1.EnvVar{Name: k, Value: v})
	}
	return tj
}

// create creates tj on backend. spec.backend goes through an unstructured
// object: API versions without the field prune it (the Kubeflow backend
// is then the only one), later ones honour it.
func create(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob, backend string) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(trainingv1alpha1.GroupVersion.WithKind("TrainingJob"))
	if err := unstructured.SetNestedField(u.Object, backend, "spec", "backend"); err != nil {
		t.Fatal(err)
	}
	if err := e.C.Create(t.Context(), u); err != nil {
		t.Fatalf("create TrainingJob %s: %v", tj.Name, err)
	}
}

// TestDDPSampleSucceeds: two pods train with real torch.distributed and
// agree on the allreduce; the job succeeds in one run.
func TestDDPSampleSucceeds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		tj := newJob(t, ns, "ddp", map[string]string{"TRAIN_STEPS": "20", "CHECKPOINT_EVERY": "5"})
		create(t, e, tj, backend)
		e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
		if tj.Status.Run != 1 || tj.Status.RestartCount != 0 {
			t.Errorf("run %d, restarts %d; want one run", tj.Status.Run, tj.Status.RestartCount)
		}
		logs, err := e.RunLogs(t.Context(), tj, 1)
		if err != nil {
			t.Fatal(err)
		}
		var results int
		for _, l := range logs {
			if strings.Contains(l, `"world": 2`) && strings.Contains(l, "RESULT") {
				results++
			}
		}
		if results != 2 {
			t.Errorf("%d of the pods reported a result of a world of 2, want 2: %v", results, logs)
		}
	})
}

var checkpointLine = regexp.MustCompile(`checkpoint step (\d+)`)
var resumedLine = regexp.MustCompile(`resumed from \S+ at step (\d+)`)

// resumeSteps is how long the resumed training runs: 120 s at 0.5 s a step,
// so that the first run is still training when its worker is deleted
// (about step 70 on the nightly's machine), and the second run's remaining
// steps keep the suite short (each 100 steps are 50 s per backend).
const resumeSteps = 240

// TestWorkerDeletedResumesFromCheckpoint: a worker pod deleted while the
// job trains makes the operator start a second run, whose rank 0 resumes
// from the newest checkpoint the first run wrote.
func TestWorkerDeletedResumesFromCheckpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		tj := newJob(t, ns, "resume", map[string]string{"TRAIN_STEPS": strconv.Itoa(resumeSteps), "CHECKPOINT_EVERY": "5", "STEP_SECONDS": "0.5"})
		create(t, e, tj, backend)
		var saved int
		var worker string
		steps.Until(t, "the first run to write a checkpoint", trainTimeout, func(ctx context.Context) (bool, error) {
			logs, err := e.RunLogs(ctx, tj, 1)
			saved, worker = 0, ""
			for name, l := range logs {
				if m := checkpointLine.FindAllStringSubmatch(l, -1); len(m) > 0 {
					saved, _ = strconv.Atoi(m[len(m)-1][1])
				} else if strings.Contains(l, "step ") {
					worker = name
				}
			}
			return saved >= 10 && worker != "", err
		})
		if err := e.CS.CoreV1().Pods(ns).Delete(t.Context(), worker, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Logf("deleted worker %s after checkpoint step %d", worker, saved)
		e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
		if tj.Status.Run != 2 || tj.Status.RestartCount != 1 {
			t.Fatalf("run %d, restarts %d; want the second run after one restart (runs %+v)", tj.Status.Run, tj.Status.RestartCount, tj.Status.Runs)
		}
		logs, err := e.RunLogs(t.Context(), tj, 2)
		if err != nil {
			t.Fatal(err)
		}
		resumed := -1
		for _, l := range logs {
			if m := resumedLine.FindStringSubmatch(l); m != nil {
				resumed, _ = strconv.Atoi(m[1])
			}
		}
		// The first run may have saved more after the last log read and
		// before the worker's deletion stopped it: at least the step seen.
		if resumed < saved || resumed%5 != 0 || resumed >= resumeSteps {
			t.Errorf("second run resumed at step %d, want a checkpoint step >= %d; logs %v", resumed, saved, logs)
		}
		t.Logf("run 2 resumed at step %d (last checkpoint seen before the deletion: step %d)", resumed, saved)
	})
}

// TestUserErrorFailsWithoutRetry: exit 1 is the user's error: Failed at
// once, no second run, the reason and the pod's message in status.
func TestUserErrorFailsWithoutRetry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		tj := newJob(t, ns, "user-error", nil)
		tj.Spec.Command = []string{"sh", "-c", "echo 'e2e: bad hyperparameter' >&2; exit 1"}
		create(t, e, tj, backend)
		e.WaitCondition(t, tj, "Failed", metav1.ConditionTrue, "", trainTimeout)
		if tj.Status.Run != 1 || tj.Status.RestartCount != 0 || len(tj.Status.Runs) > 1 {
			t.Errorf("a user error was retried: run %d, restarts %d, runs %+v", tj.Status.Run, tj.Status.RestartCount, tj.Status.Runs)
		}
		failed := meta.FindStatusCondition(tj.Status.Conditions, "Failed")
		if tj.Status.Failure == nil || tj.Status.Failure.Class != "User" || failed.Reason == "" || failed.Message == "" {
			t.Errorf("failure not explained: failure %+v, condition %+v", tj.Status.Failure, failed)
		}
	})
}

// TestTTLRemovesFinishedJob: ttlSecondsAfterFinished deletes the
// TrainingJob and its pods after it finished.
func TestTTLRemovesFinishedJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		tj := newJob(t, ns, "ttl", map[string]string{"TRAIN_STEPS": "2", "CHECKPOINT_EVERY": "1"})
		tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](20)
		create(t, e, tj, backend)
		e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
		e.Gone(t, tj, ttlTimeout)
		steps.Until(t, "the expired job's pods to go", ttlTimeout, func(ctx context.Context) (bool, error) {
			var pods corev1.PodList
			err := e.C.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{trainingv1alpha1.LabelJobName: "ttl"})
			return err == nil && len(pods.Items) == 0, err
		})
	})
}
