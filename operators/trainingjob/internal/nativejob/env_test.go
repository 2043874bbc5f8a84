package nativejob

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
	"github.com/ml-platform/ml-platform/shared/accelerator"
)

var settings = backend.Settings{
	OperatorName:     "trainingjob-operator",
	Catalog:          accelerator.Default(),
	SharedMemorySize: resource.MustParse("1Gi"),
	RunAsUser:        1000,
}

func newTJ(fw trainingv1alpha1.Framework, workers int32) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mnist"},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: fw, Image: "registry.example.com/mnist:1", Workers: workers,
			Env: []corev1.EnvVar{{Name: "RANK", Value: "user-set"}, {Name: "EPOCHS", Value: "3"}},
		},
	}
}

// kubeflowPod is one pod of the kubeflow backend: its replica type and
// index, and the framework variables Kubeflow training-operator v1.8.1
// gives it (pkg/controller.v1/<framework>: setPodEnv / SetPodEnv /
// genTFConfigJSONStr) for the job the kubeflow backend generates.
type kubeflowPod struct {
	role  string
	index int
	env   map[string]string
}

// kubeflowHosts maps Kubeflow's per-pod Service names of run job to the
// native backend's host names of the same rank: the coordinator (Master,
// Chief, paddle's Worker 0) is rank 0 and Worker k is rank k+1. A run of
// one pod has no Service on the native backend and names itself localhost.
func kubeflowHosts(job string, coordinator string, pods int) func(string) string {
	re := regexp.MustCompile(regexp.QuoteMeta(job) + `-(master|chief|worker)-(\d+)`)
	return func(s string) string {
		return re.ReplaceAllStringFunc(s, func(m string) string {
			if pods == 1 {
				return "localhost"
			}
			parts := re.FindStringSubmatch(m)
			var idx int
			_, _ = fmt.Sscan(parts[2], &idx)
			if parts[1] != coordinator {
				idx++
			}
			return fmt.Sprintf("%s-%d.%s", job, idx, rankdns.Service)
		})
	}
}

// expand resolves a container's environment as the kubelet does for a pod
// at completion index i: later definitions win, and $(VAR) expands from
// the variables defined before it. Field references resolve to what the
// kubelet would put there.
func expand(env []corev1.EnvVar, index int) map[string]string {
	out := map[string]string{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.annotations['batch.kubernetes.io/job-completion-index']":
				v = fmt.Sprint(index)
			case "status.podIP":
				v = "10.0.0.7"
			}
		}
		out[e.Name] = ref.ReplaceAllStringFunc(v, func(m string) string {
			if val, ok := out[ref.FindStringSubmatch(m)[1]]; ok {
				return val
			}
			return m
		})
	}
	return out
}

func TestFrameworkEnvironmentMatchesKubeflow(t *testing.T) {
	cases := map[string]struct {
		tj          *trainingv1alpha1.TrainingJob
		coordinator string
		// tfChief says Kubeflow's TF_CONFIG has a chief that the native
		// backend lists as worker 0.
		tfChief bool
		pods    []kubeflowPod
	}{
		"pytorch 3 pods, 2 processes each": {
			tj: func() *trainingv1alpha1.TrainingJob {
				tj := newTJ(trainingv1alpha1.FrameworkPyTorch, 3)
				tj.Spec.NprocPerNode = ptr.To[int32](2)
				return tj
			}(),
			coordinator: "master",
			pods: []kubeflowPod{
				{"master", 0, pytorchKubeflow("0", "6", "2", "3")},
				{"worker", 0, pytorchKubeflow("1", "6", "2", "3")},
				{"worker", 1, pytorchKubeflow("2", "6", "2", "3")},
			},
		},
		"pytorch single pod, nproc from accelerators": {
			tj: func() *trainingv1alpha1.TrainingJob {
				tj := newTJ(trainingv1alpha1.FrameworkPyTorch, 1)
				tj.Spec.Resources = &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 4}}
				return tj
			}(),
			coordinator: "master",
			pods:        []kubeflowPod{{"master", 0, pytorchKubeflow("0", "4", "4", "1")}},
		},
		"xgboost 3 pods": {
			tj:          newTJ(trainingv1alpha1.FrameworkXGBoost, 3),
			coordinator: "master",
			pods: []kubeflowPod{
				{"master", 0, xgboostKubeflow("0")},
				{"worker", 0, xgboostKubeflow("1")},
				{"worker", 1, xgboostKubeflow("2")},
			},
		},
		"tensorflow 3 pods, MultiWorkerMirrored": {
			tj:          newTJ(trainingv1alpha1.FrameworkTensorFlow, 3),
			coordinator: "chief",
			tfChief:     true,
			pods: []kubeflowPod{
				{"chief", 0, map[string]string{"TF_CONFIG": tfKubeflow("chief", 0)}},
				{"worker", 0, map[string]string{"TF_CONFIG": tfKubeflow("worker", 0)}},
				{"worker", 1, map[string]string{"TF_CONFIG": tfKubeflow("worker", 1)}},
			},
		},
		"tensorflow single pod gets no TF_CONFIG": {
			tj:          newTJ(trainingv1alpha1.FrameworkTensorFlow, 1),
			coordinator: "chief",
			pods:        []kubeflowPod{{"chief", 0, map[string]string{}}},
		},
		"paddle single pod, collective": {
			tj:          newTJ(trainingv1alpha1.FrameworkPaddle, 1),
			coordinator: "worker",
			pods: []kubeflowPod{{"worker", 0, map[string]string{
				"PYTHONUNBUFFERED": "1", "PADDLE_JOB_ID": "mnist-r1", "PADDLE_NNODES": "1",
				"POD_IP_DUMMY": "10.0.0.7", "PADDLE_MASTER": "10.0.0.7:36543",
			}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj, err := NewBackend(settings).Build(tc.tj, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			job := obj.(*batchv1.Job)
			if got := int(*job.Spec.Completions); got != len(tc.pods) {
				t.Fatalf("completions = %d, want one per Kubeflow pod (%d)", got, len(tc.pods))
			}
			toNative := kubeflowHosts("mnist-r1", tc.coordinator, len(tc.pods))
			for _, p := range tc.pods {
				rank := p.index
				if p.role != tc.coordinator {
					rank++
				}
				got := expand(job.Spec.Template.Spec.Containers[0].Env, rank)
				want := map[string]string{}
				for k, v := range p.env {
					want[k] = toNative(v)
				}
				if tc.tfChief {
					want["TF_CONFIG"] = normalTFConfig(t, want["TF_CONFIG"])
					got["TF_CONFIG"] = normalTFConfig(t, got["TF_CONFIG"])
				}
				user := map[string]bool{EnvCompletionIndex: true}
				for _, e := range tc.tj.Spec.Env {
					user[e.Name] = true
				}
				for k := range got {
					if _, ok := want[k]; !ok && !user[k] {
						t.Errorf("rank %d: %s=%q is set natively but not by Kubeflow", rank, k, got[k])
					}
				}
				gotFramework := map[string]string{}
				for k := range want {
					if v, ok := got[k]; ok {
						gotFramework[k] = v
					}
				}
				if diff := cmp.Diff(want, gotFramework); diff != "" {
					t.Errorf("%s %d (rank %d): native environment differs from Kubeflow's (-kubeflow +native):\n%s", p.role, p.index, rank, diff)
				}
				if got["EPOCHS"] != "3" {
					t.Errorf("rank %d: the user's EPOCHS is %q", rank, got["EPOCHS"])
				}
			}
		})
	}
}

func pytorchKubeflow(rank, worldSize, nproc, nnodes string) map[string]string {
	return map[string]string{
		"PYTHONUNBUFFERED": "1",
		"MASTER_PORT":      "23456", "PET_MASTER_PORT": "23456",
		"MASTER_ADDR": "mnist-r1-master-0", "PET_MASTER_ADDR": "mnist-r1-master-0",
		"WORLD_SIZE": worldSize, "RANK": rank, "PET_NODE_RANK": rank,
		"PET_NPROC_PER_NODE": nproc, "PET_NNODES": nnodes,
	}
}

func xgboostKubeflow(rank string) map[string]string {
	return map[string]string{
		"MASTER_PORT": "9999", "MASTER_ADDR": "mnist-r1-master-0",
		"WORLD_SIZE": "3", "RANK": rank, "PYTHONUNBUFFERED": "1",
		"WORKER_PORT": "9999", "WORKER_ADDRS": "mnist-r1-worker-0,mnist-r1-worker-1",
	}
}

func tfKubeflow(role string, index int) string {
	return fmt.Sprintf(`{"cluster":{"chief":["mnist-r1-chief-0.team-a.svc:2222"],"worker":["mnist-r1-worker-0.team-a.svc:2222","mnist-r1-worker-1.team-a.svc:2222"]},"task":{"type":%q,"index":%d},"environment":"cloud"}`, role, index)
}

// normalTFConfig reduces a TF_CONFIG to what MultiWorkerMirroredStrategy
// uses: the hosts in rank order (the chief, if any, first), this task's
// rank, and the environment.
func normalTFConfig(t *testing.T, s string) string {
	t.Helper()
	var cfg struct {
		Cluster map[string][]string `json:"cluster"`
		Task    struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		} `json:"task"`
		Environment string `json:"environment"`
	}
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		t.Fatalf("TF_CONFIG %q: %v", s, err)
	}
	hosts := append(append([]string{}, cfg.Cluster["chief"]...), cfg.Cluster["worker"]...)
	rank := cfg.Task.Index
	if cfg.Task.Type == "worker" {
		rank += len(cfg.Cluster["chief"])
	}
	return fmt.Sprintf("hosts=%s rank=%d environment=%s", strings.Join(hosts, ","), rank, cfg.Environment)
}

// TestJAXEnvironmentIsKubeflowTrainers: every pod is one JAX process with
// the variables Kubeflow Trainer's JAX runtime sets (pkg/runtime/framework
// /plugins/jax), the coordinator being rank 0's stable name and port.
func TestJAXEnvironmentIsKubeflowTrainers(t *testing.T) {
	obj, err := NewBackend(settings).Build(newTJ(trainingv1alpha1.FrameworkJAX, 3), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := obj.(*batchv1.Job)
	c := job.Spec.Template.Spec.Containers[0]
	if c.Name != "jax" || len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8899 {
		t.Errorf("container %s ports %v, want jax with port 8899", c.Name, c.Ports)
	}
	for rank := range 3 {
		got := expand(c.Env, rank)
		want := map[string]string{
			"JAX_COORDINATOR_ADDRESS": "mnist-r1-0.trainingjob-ranks.team-a.svc:8899",
			"JAX_COORDINATOR_PORT":    "8899",
			"JAX_NUM_PROCESSES":       "3",
			"JAX_PROCESS_ID":          fmt.Sprint(rank),
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", rank, k, got[k], v)
			}
		}
	}
}

// TestSinglePodJAXCoordinatesOnLocalhost: a run of one pod has no headless
// Service, so its coordinator is the pod itself, not a name under a
// Service that does not exist.
func TestSinglePodJAXCoordinatesOnLocalhost(t *testing.T) {
	obj, err := NewBackend(settings).Build(newTJ(trainingv1alpha1.FrameworkJAX, 1), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := expand(obj.(*batchv1.Job).Spec.Template.Spec.Containers[0].Env, 0)
	if got["JAX_COORDINATOR_ADDRESS"] != "localhost:8899" || got["JAX_NUM_PROCESSES"] != "1" {
		t.Errorf("JAX_COORDINATOR_ADDRESS=%q JAX_NUM_PROCESSES=%q, want localhost:8899 and 1", got["JAX_COORDINATOR_ADDRESS"], got["JAX_NUM_PROCESSES"])
	}
}

// TestHostListsThatNoContainerCouldStartWithAreRefused: TF_CONFIG lists
// every rank's full name, and with long names and many workers it would
// pass what Linux lets one environment variable hold; the pods would
// fail with "argument list too long", which looks like the user's crash.
func TestHostListsThatNoContainerCouldStartWithAreRefused(t *testing.T) {
	long := func(workers int32) *trainingv1alpha1.TrainingJob {
		tj := newTJ(trainingv1alpha1.FrameworkTensorFlow, workers)
		tj.Name, tj.Namespace = strings.Repeat("j", 40), strings.Repeat("n", 63)
		return tj
	}
	obj, err := NewBackend(settings).Build(long(512), 1, nil)
	if err != nil {
		t.Fatalf("512 workers: %v", err)
	}
	for _, e := range obj.(*batchv1.Job).Spec.Template.Spec.Containers[0].Env {
		if n := len(e.Name) + len(e.Value) + 2; n > 128*1024 {
			t.Errorf("%s is %d bytes and was not refused", e.Name, n)
		}
	}
	_, err = NewBackend(settings).Build(long(1024), 1, nil)
	var invalid *backend.InvalidSpecError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "TF_CONFIG would be") || !strings.Contains(err.Error(), "more than Linux passes a program in one environment variable (131072)") {
		t.Errorf("1024 workers with long names: %v, want TF_CONFIG refused as an invalid spec", err)
	}
}
