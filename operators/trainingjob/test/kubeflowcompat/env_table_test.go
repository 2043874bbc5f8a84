package kubeflowcompat

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
)

// kubeflowEnvCase is one framework's environment on the kubeflow backend,
// as training-operator v1.8.1 documents it for the job the backend
// generates (one coordinating replica and workers-1 Workers; paddle only
// Workers), written out by hand: job is the run's Kubeflow job, role and
// index a pod's replica type and index.
type kubeflowEnvCase struct {
	framework trainingv1alpha1.Framework
	workers   int32
	container string
	want      func(job, ns, role string, index int) map[string]string
}

// kubeflowRank is the rank of a replica when one coordinating replica
// (Master, Chief) comes first.
func kubeflowRank(role string, index int) int {
	if role == "worker" {
		return index + 1
	}
	return index
}

func kubeflowEnvTable() map[string]kubeflowEnvCase {
	return map[string]kubeflowEnvCase{
		// The PyTorchJob environment (env:// rendezvous and torchrun's
		// PET_*): the Master is rank 0 and the rendezvous point.
		"pytorch": {trainingv1alpha1.FrameworkPyTorch, 3, "pytorch", func(job, _, role string, index int) map[string]string {
			r := strconv.Itoa(kubeflowRank(role, index))
			return map[string]string{
				"PYTHONUNBUFFERED": "1",
				"MASTER_ADDR":      job + "-master-0", "MASTER_PORT": "23456",
				"PET_MASTER_ADDR": job + "-master-0", "PET_MASTER_PORT": "23456",
				"WORLD_SIZE": "3", "RANK": r, "PET_NODE_RANK": r, "PET_NNODES": "3", "PET_NPROC_PER_NODE": "1",
			}
		}},
		// The XGBoostJob environment: the Master runs the tracker.
		"xgboost": {trainingv1alpha1.FrameworkXGBoost, 3, "xgboost", func(job, _, role string, index int) map[string]string {
			return map[string]string{
				"PYTHONUNBUFFERED": "1",
				"MASTER_ADDR":      job + "-master-0", "MASTER_PORT": "9999",
				"WORLD_SIZE": "3", "RANK": strconv.Itoa(kubeflowRank(role, index)),
				"WORKER_PORT": "9999", "WORKER_ADDRS": job + "-worker-0," + job + "-worker-1",
			}
		}},
		// TF_CONFIG with one Chief and the Workers.
		"tensorflow": {trainingv1alpha1.FrameworkTensorFlow, 3, "tensorflow", func(job, ns, role string, index int) map[string]string {
			host := func(r string, i int) string { return fmt.Sprintf("%s-%s-%d.%s.svc:2222", job, r, i, ns) }
			cfg, _ := json.Marshal(map[string]any{
				"cluster":     map[string]any{"chief": []string{host("chief", 0)}, "worker": []string{host("worker", 0), host("worker", 1)}},
				"task":        map[string]any{"type": role, "index": index},
				"environment": "cloud",
			})
			return map[string]string{"TF_CONFIG": string(cfg)}
		}},
		// Paddle's collective mode: Worker 0 is the rendezvous point at its
		// own address, the others reach it by its Service.
		"paddle": {trainingv1alpha1.FrameworkPaddle, 2, "paddle", func(job, _, _ string, index int) map[string]string {
			env := map[string]string{"PYTHONUNBUFFERED": "1", "PADDLE_JOB_ID": job, "PADDLE_NNODES": "2"}
			if index == 0 {
				env["POD_IP_DUMMY"] = harness.PodIP
				env["PADDLE_MASTER"] = harness.PodIP + ":36543"
			} else {
				env["PADDLE_MASTER"] = job + "-worker-0:36543"
			}
			return env
		}},
	}
}

// TestKubeflowEnvironmentIsTheDocumentedOne creates a TrainingJob of every
// framework the kubeflow backend runs and compares the environment of the
// pods the real training-operator creates with the documented table:
// every documented variable with its value, and no other variable but
// the platform's own (MLPLATFORM_*).
func TestKubeflowEnvironmentIsTheDocumentedOne(t *testing.T) {
	c, ns, kf := startStack(t)
	for name, tc := range kubeflowEnvTable() {
		t.Run(name, func(t *testing.T) {
			tj := &trainingv1alpha1.TrainingJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "env-" + name},
				Spec:       trainingv1alpha1.TrainingJobSpec{Framework: tc.framework, Image: "registry.example.com/train:1", Workers: tc.workers},
			}
			if err := c.Create(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
			job := tj.Name + "-r1"
			pods := &corev1.PodList{}
			poll(t, "the training-operator creates the pods of "+job+" (its log: "+kf.LogPath()+")", func(ctx context.Context) (bool, error) {
				err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubeflowv1.JobNameLabel: job})
				return len(pods.Items) == int(tc.workers), err
			})
			for _, p := range pods.Items {
				role := p.Labels[kubeflowv1.ReplicaTypeLabel]
				index, err := strconv.Atoi(p.Labels[kubeflowv1.ReplicaIndexLabel])
				if err != nil {
					t.Fatalf("pod %s has no replica index: %v", p.Name, err)
				}
				diff, err := harness.EnvDiff(&p, tc.container, tc.want(job, ns, role, index))
				if err != nil {
					t.Fatal(err)
				}
				if diff != "" {
					t.Errorf("%s %d: environment differs from the documented one (-documented +pod):\n%s", role, index, diff)
				}
			}
		})
	}
}
