package images

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ml-platform/ml-platform/e2e/cluster"
)

// result is the RESULT line of images/pytorch/root/opt/ml-platform/train.py.
type result struct {
	Rank      int     `json:"rank"`
	World     int     `json:"world"`
	Allreduce float64 `json:"allreduce"`
	Expected  float64 `json:"expected"`
	StartStep int     `json:"start_step"`
	FinalStep int     `json:"final_step"`
	FirstLoss float64 `json:"first_loss"`
	LastLoss  float64 `json:"last_loss"`
}

const (
	ddpSteps      = 40
	ddpCheckpoint = 5
)

var stepLine = regexp.MustCompile(`(?m)^step (\d+) loss ([0-9.e+-]+)$`)

// ddpPod is rank RANK of a two-process job that rendezvous through the
// headless Service ddp (what a PyTorchJob sets up), with the TrainingJob
// checkpoint contract's environment for run RUN. Only rank 0 mounts the
// checkpoint claim (ReadWriteOnce).
func ddpPod(img string, rank, run int, stepSeconds string) *corev1.Pod {
	name := fmt.Sprintf("ddp-%d", rank)
	pod := restrictedPod(name, img, 65532, 65532)
	pod.Labels["service"] = "ddp"
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = "ddp"
	env := []corev1.EnvVar{
		{Name: "MASTER_ADDR", Value: "ddp-0.ddp"},
		{Name: "MASTER_PORT", Value: "29500"},
		{Name: "WORLD_SIZE", Value: "2"},
		{Name: "RANK", Value: strconv.Itoa(rank)},
		{Name: "TRAIN_STEPS", Value: strconv.Itoa(ddpSteps)},
		{Name: "CHECKPOINT_EVERY", Value: strconv.Itoa(ddpCheckpoint)},
		{Name: "STEP_SECONDS", Value: stepSeconds},
		{Name: "MLPLATFORM_RUN", Value: strconv.Itoa(run)},
		{Name: "MLPLATFORM_RESTART_COUNT", Value: strconv.Itoa(run - 1)},
		{Name: "MLPLATFORM_RESUME", Value: strconv.FormatBool(run > 1)},
	}
	c := &pod.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{ContainerPort: 29500}}
	if rank == 0 {
		env = append(env, corev1.EnvVar{Name: "MLPLATFORM_CHECKPOINT_DIR", Value: "/checkpoint"})
		mount(pod, "checkpoint", "/checkpoint", claim("checkpoint"))
	}
	c.Env = env
	return pod
}

func parseResult(t *testing.T, logs string) result {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			var r result
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatalf("RESULT line %q: %v", rest, err)
			}
			return r
		}
	}
	t.Fatalf("no RESULT line in logs:\n%s", logs)
	return result{}
}

// TestPyTorchDDPResumesFromCheckpoint runs a 2-process DDP job over gloo,
// kills it after it wrote a checkpoint, runs it again as the next run of
// the same job and checks that it continued from the checkpoint.
func TestPyTorchDDPResumesFromCheckpoint(t *testing.T) {
	cs := cluster.Client(t)
	ns := restrictedNamespace(t, cs)
	img := image(t, "pytorch")
	createService(t, cs, ns, "ddp", 29500, true)
	createClaim(t, cs, ns, "checkpoint")

	// Run 1, slowed down so that it can be killed mid-way.
	for rank := range 2 {
		createPod(t, cs, ns, ddpPod(img, rank, 1, "1"))
	}
	var run1 string
	waitFor(t, "run 1 to write its second checkpoint", func(ctx context.Context) (bool, error) {
		run1 = cluster.PodLogs(cs, ns, "ddp-0")
		return strings.Contains(run1, fmt.Sprintf("checkpoint step %d\n", 2*ddpCheckpoint)), nil
	})
	if !strings.Contains(run1, "allreduce 3 expected 3") {
		t.Errorf("run 1 rank 0: no correct allreduce result in its logs:\n%s", run1)
	}
	steps := stepLine.FindAllStringSubmatch(run1, -1)
	first, _ := strconv.ParseFloat(steps[0][2], 64)
	last, _ := strconv.ParseFloat(steps[len(steps)-1][2], 64)
	if !(last < first) {
		t.Errorf("run 1: loss did not decrease: step %s %g, step %s %g", steps[0][1], first, steps[len(steps)-1][1], last)
	}
	killedAt, _ := strconv.Atoi(steps[len(steps)-1][1])
	for rank := range 2 {
		deletePod(t, cs, ns, fmt.Sprintf("ddp-%d", rank))
	}
	t.Logf("run 1 killed after step %d, loss %g -> %g", killedAt, first, last)

	// Run 2: resumes from the newest checkpoint and finishes.
	for rank := range 2 {
		createPod(t, cs, ns, ddpPod(img, rank, 2, "0"))
	}
	var results [2]result
	for rank := range 2 {
		ok, logs := waitFinished(t, cs, ns, fmt.Sprintf("ddp-%d", rank))
		if !ok {
			t.Fatalf("run 2 rank %d failed:\n%s", rank, logs)
		}
		results[rank] = parseResult(t, logs)
		if rank == 0 && !strings.Contains(logs, "resumed from /checkpoint/ckpt-") {
			t.Errorf("run 2 rank 0 did not resume from a checkpoint:\n%s", logs)
		}
	}
	for rank, r := range results {
		if r.Allreduce != 3 || r.Expected != 3 {
			t.Errorf("rank %d: allreduce %g, expected 3 (its own expectation %g)", rank, r.Allreduce, r.Expected)
		}
		// The step counter continues: from a checkpoint at least as new as
		// the one the test waited for, never from the start.
		if r.StartStep < 2*ddpCheckpoint || r.StartStep > killedAt || r.StartStep%ddpCheckpoint != 0 {
			t.Errorf("rank %d: run 2 started at step %d, want a checkpoint step in [%d, %d]", rank, r.StartStep, 2*ddpCheckpoint, killedAt)
		}
		if r.FinalStep != ddpSteps {
			t.Errorf("rank %d: final step %d, want %d", rank, r.FinalStep, ddpSteps)
		}
		if !(r.LastLoss < first) {
			t.Errorf("rank %d: last loss %g not below run 1's first %g", rank, r.LastLoss, first)
		}
	}
	if results[0].StartStep != results[1].StartStep {
		t.Errorf("ranks resumed at different steps: %d and %d", results[0].StartStep, results[1].StartStep)
	}
	t.Logf("run 2 resumed at step %d, final loss %g", results[0].StartStep, results[0].LastLoss)
}
