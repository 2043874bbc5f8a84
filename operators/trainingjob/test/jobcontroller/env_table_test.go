package jobcontroller

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
)

// nativeEnvCase is one framework's documented environment on the native
// backend (charts/trainingjob-operator/README.md, Backends), written out
// by hand from the frameworks' documentation rather than derived from the
// operator's code: job is the run's Job, whose ranks are the subdomain of
// the namespace's headless Service trainingjob-ranks, rank the pod's
// completion index.
type nativeEnvCase struct {
	framework trainingv1alpha1.Framework
	workers   int32
	container string
	want      func(job, ns string, rank, pods int) map[string]string
}

func nativeEnvTable() map[string]nativeEnvCase {
	return map[string]nativeEnvCase{
		// Kubeflow's PyTorchJob environment, read by torch.distributed's
		// env:// rendezvous and torchrun (PET_*).
		"pytorch": {trainingv1alpha1.FrameworkPyTorch, 3, "pytorch", func(job, _ string, rank, pods int) map[string]string {
			r, n := strconv.Itoa(rank), strconv.Itoa(pods)
			return map[string]string{
				"PYTHONUNBUFFERED": "1",
				"MASTER_ADDR":      job + "-0.trainingjob-ranks", "MASTER_PORT": "23456",
				"PET_MASTER_ADDR": job + "-0.trainingjob-ranks", "PET_MASTER_PORT": "23456",
				"WORLD_SIZE": n, "RANK": r, "PET_NODE_RANK": r, "PET_NNODES": n, "PET_NPROC_PER_NODE": "1",
			}
		}},
		// Kubeflow's XGBoostJob environment: rank 0 runs the tracker.
		"xgboost": {trainingv1alpha1.FrameworkXGBoost, 3, "xgboost", func(job, _ string, rank, pods int) map[string]string {
			return map[string]string{
				"PYTHONUNBUFFERED": "1",
				"MASTER_ADDR":      job + "-0.trainingjob-ranks", "MASTER_PORT": "9999",
				"WORLD_SIZE": strconv.Itoa(pods), "RANK": strconv.Itoa(rank),
				"WORKER_PORT": "9999", "WORKER_ADDRS": job + "-1.trainingjob-ranks," + job + "-2.trainingjob-ranks",
			}
		}},
		// TensorFlow's TF_CONFIG (cluster and task) for
		// MultiWorkerMirroredStrategy: every rank a worker, worker 0 the
		// chief.
		"tensorflow": {trainingv1alpha1.FrameworkTensorFlow, 3, "tensorflow", func(job, ns string, rank, pods int) map[string]string {
			workers := make([]string, pods)
			for i := range workers {
				workers[i] = fmt.Sprintf("%s-%d.trainingjob-ranks.%s.svc:2222", job, i, ns)
			}
			cfg, _ := json.Marshal(map[string]any{
				"cluster":     map[string]any{"worker": workers},
				"task":        map[string]any{"type": "worker", "index": rank},
				"environment": "cloud",
			})
			return map[string]string{"TF_CONFIG": string(cfg)}
		}},
		// Paddle's collective mode on one pod: the pod is its own
		// rendezvous point.
		"paddle": {trainingv1alpha1.FrameworkPaddle, 1, "paddle", func(job, _ string, _, pods int) map[string]string {
			return map[string]string{
				"PYTHONUNBUFFERED": "1",
				"PADDLE_JOB_ID":    job, "PADDLE_NNODES": strconv.Itoa(pods),
				"POD_IP_DUMMY": harness.PodIP, "PADDLE_MASTER": harness.PodIP + ":36543",
			}
		}},
		// Kubeflow Trainer's JAX runtime, read by jax.distributed.initialize:
		// process 0 runs the coordinator.
		"jax": {trainingv1alpha1.FrameworkJAX, 3, "jax", func(job, ns string, rank, pods int) map[string]string {
			return map[string]string{
				"PYTHONUNBUFFERED":        "1",
				"JAX_COORDINATOR_ADDRESS": fmt.Sprintf("%s-0.trainingjob-ranks.%s.svc:8899", job, ns),
				"JAX_COORDINATOR_PORT":    "8899",
				"JAX_NUM_PROCESSES":       strconv.Itoa(pods),
				"JAX_PROCESS_ID":          strconv.Itoa(rank),
			}
		}},
	}
}

// TestNativeEnvironmentIsTheDocumentedOne creates a TrainingJob of every
// framework on the native backend and compares the environment of the
// pods the real Job controller creates, resolved as the kubelet resolves
// it with each pod's own completion index, with the documented table:
// every documented variable with its value, and no other variable but
// the platform's own (MLPLATFORM_*, JOB_COMPLETION_INDEX).
func TestNativeEnvironmentIsTheDocumentedOne(t *testing.T) {
	c, ns := setup(t)
	for name, tc := range nativeEnvTable() {
		t.Run(name, func(t *testing.T) {
			tj := newTJ(ns, "env-"+name, tc.workers)
			tj.Spec.Framework = tc.framework
			if err := c.Create(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
			job := tj.Name + "-r1"
			pods := waitPods(t, c, ns, job, int(tc.workers))
			for _, p := range pods {
				rank, err := strconv.Atoi(p.Annotations[batchv1.JobCompletionIndexAnnotation])
				if err != nil {
					t.Fatalf("pod %s has no completion index: %v", p.Name, err)
				}
				diff, err := harness.EnvDiff(&p, tc.container, tc.want(job, ns, rank, len(pods)))
				if err != nil {
					t.Fatal(err)
				}
				if diff != "" {
					t.Errorf("rank %d: environment differs from the documented one (-documented +pod):\n%s", rank, diff)
				}
			}
		})
	}
}
