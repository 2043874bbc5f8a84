package training

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// contractProgram proves a framework's distributed contract without the
// framework (see its doc string); it needs Python's standard library only.
//
//go:embed testdata/contract.py
var contractProgram string

// frameworkJob is a TrainingJob of framework with workers pods and no
// checkpoint, small enough for the kind cluster.
func frameworkJob(t *testing.T, ns, name string, framework trainingv1alpha1.Framework, workers int32, env map[string]string) *trainingv1alpha1.TrainingJob {
	tj := &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: framework,
			Image:     steps.Image(t, "xgboost"),
			Workers:   workers,
			Resources: &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			}},
			RunPolicy: trainingv1alpha1.RunPolicy{CleanPodPolicy: "None"},
		},
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		tj.Spec.Env = append(tj.Spec.Env, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return tj
}

// terminated waits until every pod of run 1 of tj has terminated and
// returns their termination messages by pod name, with the pods. The
// operator may record Succeeded when rank 0 ends, before the others.
func terminated(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob, pods int) (map[string]string, map[string]corev1.Pod) {
	t.Helper()
	messages, byName := map[string]string{}, map[string]corev1.Pod{}
	steps.Until(t, fmt.Sprintf("the %d pods of %s to terminate", pods, tj.Name), trainTimeout, func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := e.C.List(ctx, &list, client.InNamespace(tj.Namespace), client.MatchingLabels{
			trainingv1alpha1.LabelJobName: tj.Name, trainingv1alpha1.LabelRun: "1",
		}); err != nil {
			return false, err
		}
		clear(messages)
		clear(byName)
		for _, p := range list.Items {
			for _, c := range p.Status.ContainerStatuses {
				if s := c.State.Terminated; s != nil {
					if s.ExitCode != 0 {
						return false, fmt.Errorf("pod %s exited %d: %s", p.Name, s.ExitCode, s.Message)
					}
					messages[p.Name] = s.Message
					byName[p.Name] = p
				}
			}
		}
		return len(list.Items) == pods && len(messages) == pods, nil
	})
	return messages, byName
}

// waitProgress waits until tj's status shows the progress its rank 0
// reported last: step of total steps, with metrics among the values
// (the operator writes a final report at once, but after the report
// returned, so possibly after the job ended).
func waitProgress(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob, step, total int64, metrics map[string]string) *trainingv1alpha1.TrainingProgress {
	t.Helper()
	var got *trainingv1alpha1.TrainingProgress
	steps.Until(t, fmt.Sprintf("status.progress of %s at step %d of %d", tj.Name, step, total), trainTimeout, func(ctx context.Context) (bool, error) {
		if err := e.C.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
			return false, err
		}
		got = tj.Status.Progress
		return got != nil && got.Step == step, nil
	})
	if got.TotalSteps != total || got.Percent == nil || *got.Percent != 100 {
		t.Errorf("status.progress %+v: want %d of %d steps, 100%%", got, step, total)
	}
	for k, v := range metrics {
		if got.Metrics[k] != v {
			t.Errorf("status.progress metric %s = %q, want %q (metrics %v)", k, got.Metrics[k], v, got.Metrics)
		}
	}
	return got
}

// xgboostResult is what images/xgboost's training script reports.
type xgboostResult struct {
	Rank         int     `json:"rank"`
	World        int     `json:"world"`
	XGBoostRank  int     `json:"xgboostRank"`
	XGBoostWorld int     `json:"xgboostWorld"`
	Allreduce    float64 `json:"allreduce"`
	Rounds       int     `json:"rounds"`
	FirstRMSE    float64 `json:"firstRMSE"`
	LastRMSE     float64 `json:"lastRMSE"`
	ModelSHA256  string  `json:"modelSHA256"`
}

const xgboostRounds = 15

// TestXGBoostTrainsOneModelOnEveryWorker: three pods train one XGBoost
// model through XGBoost's own rabit tracker, started by rank 0, from
// nothing but the environment the backend gives a framework xgboost job.
// Every pod's termination message proves it joined: XGBoost gave it the
// rank RANK says, in a world of three, the allreduce adds every rank, all
// ran the rounds asked for, the training error fell, and every rank holds
// the same model.
func TestXGBoostTrainsOneModelOnEveryWorker(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		const workers = 3
		start := time.Now()
		tj := frameworkJob(t, ns, "xgboost", trainingv1alpha1.FrameworkXGBoost, workers, map[string]string{"XGB_ROUNDS": strconv.Itoa(xgboostRounds)})
		create(t, e, tj, backend)
		e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
		messages, _ := terminated(t, e, tj, workers)
		var ranks []int
		var models, rmses []string
		for pod, m := range messages {
			var r xgboostResult
			if err := json.Unmarshal([]byte(m), &r); err != nil {
				t.Fatalf("pod %s: termination message %q: %v", pod, m, err)
			}
			ranks = append(ranks, r.Rank)
			models = append(models, r.ModelSHA256)
			rmses = append(rmses, strconv.FormatFloat(r.LastRMSE, 'g', -1, 64))
			if r.World != workers || r.XGBoostWorld != workers || r.XGBoostRank != r.Rank {
				t.Errorf("pod %s: rank %d of %d, XGBoost's rank %d of %d; want XGBoost's rank to be RANK in a world of %d", pod, r.Rank, r.World, r.XGBoostRank, r.XGBoostWorld, workers)
			}
			if r.Allreduce != workers*(workers+1)/2 {
				t.Errorf("pod %s: allreduce %g, want %d", pod, r.Allreduce, workers*(workers+1)/2)
			}
			if r.Rounds != xgboostRounds || !(r.LastRMSE < r.FirstRMSE/2) {
				t.Errorf("pod %s: %d rounds, RMSE %g -> %g; want %d rounds that at least halve the error", pod, r.Rounds, r.FirstRMSE, r.LastRMSE, xgboostRounds)
			}
		}
		// Rank 0 reported every round through the progress helper; the
		// last one is the model's final error, the same on every rank.
		p := waitProgress(t, e, tj, xgboostRounds, xgboostRounds, nil)
		if rmse, err := strconv.ParseFloat(p.Metrics["rmse"], 64); err != nil || len(rmses) == 0 || math.Abs(rmse-mustFloat(t, rmses[0])) > 1e-6 {
			t.Errorf("status.progress metric rmse %q, want the final train-rmse %v", p.Metrics["rmse"], rmses)
		}
		slices.Sort(ranks)
		if diff := cmp.Diff([]int{0, 1, 2}, ranks); diff != "" {
			t.Errorf("ranks (-want +got):\n%s", diff)
		}
		slices.Sort(models)
		slices.Sort(rmses)
		if len(slices.Compact(slices.Clone(models))) != 1 || len(slices.Compact(slices.Clone(rmses))) != 1 {
			t.Errorf("the ranks did not train one model: models %v, final RMSE %v", models, rmses)
		}
		t.Logf("%s: XGBoost on %d pods, %d rounds, final train-rmse %s, in %s", backend, workers, xgboostRounds, rmses[0], time.Since(start).Round(time.Second))
	})
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// contractResult is what testdata/contract.py reports.
type contractResult struct {
	OK        bool            `json:"ok"`
	Error     string          `json:"error"`
	Identity  string          `json:"identity"`
	Rank      int             `json:"rank"`
	World     int             `json:"world"`
	Reached   []string        `json:"reached"`
	ReachedBy []string        `json:"reachedBy"`
	Env       json.RawMessage `json:"env"`
}

// runContract runs the contract program for framework on pods pods of
// backend and checks what every rank proved: a world of pods ranks, each
// rank once, each rank reached by and reaching every other. It returns the
// results by pod for the framework's own checks.
func runContract(t *testing.T, e *steps.Env, ns, backend string, framework trainingv1alpha1.Framework, pods int32) (*trainingv1alpha1.TrainingJob, map[string]contractResult, map[string]corev1.Pod) {
	t.Helper()
	start := time.Now()
	tj := frameworkJob(t, ns, string(framework)+"-contract", framework, pods, nil)
	// The program is longer than a command item may be: it reaches the
	// pods through a ConfigMap.
	program := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tj.Name + "-program"},
		Data:       map[string]string{"contract.py": contractProgram},
	}
	if err := e.C.Create(t.Context(), program); err != nil {
		t.Fatal(err)
	}
	tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{
		Volumes: []corev1.Volume{{Name: "program", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: program.Name}},
		}}},
		VolumeMounts: []trainingv1alpha1.VolumeMount{{Name: "program", MountPath: "/opt/contract", ReadOnly: true}},
	}
	tj.Spec.Command = []string{"/usr/bin/python3", "/opt/contract/contract.py", string(framework)}
	create(t, e, tj, backend)
	e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
	messages, byName := terminated(t, e, tj, int(pods))
	results := map[string]contractResult{}
	var identities []string
	for pod, m := range messages {
		var r contractResult
		if err := json.Unmarshal([]byte(m), &r); err != nil {
			t.Fatalf("pod %s: termination message %q: %v", pod, m, err)
		}
		if !r.OK || r.World != int(pods) {
			t.Errorf("pod %s: ok %t (%s), world %d; want ok in a world of %d", pod, r.OK, r.Error, r.World, pods)
		}
		results[pod] = r
		identities = append(identities, r.Identity)
	}
	slices.Sort(identities)
	ranks := map[int]bool{}
	for pod, r := range results {
		ranks[r.Rank] = true
		others := slices.DeleteFunc(slices.Clone(identities), func(s string) bool { return s == r.Identity })
		if !cmp.Equal(others, r.Reached) || !cmp.Equal(others, r.ReachedBy) {
			t.Errorf("pod %s (%s): reached %v, reached by %v; want every other rank %v both ways", pod, r.Identity, r.Reached, r.ReachedBy, others)
		}
	}
	if len(ranks) != int(pods) || len(slices.Compact(identities)) != int(pods) {
		t.Errorf("ranks %v, identities %v: want %d distinct", ranks, identities, pods)
	}
	// Rank 0, and only rank 0, reports the proof through the progress
	// helper: every rank proven, every other one reached.
	waitProgress(t, e, tj, int64(pods), int64(pods), map[string]string{"reached": strconv.Itoa(int(pods) - 1)})
	t.Logf("%s: %s contract on %d pods (%v) proved in %s", backend, framework, pods, identities, time.Since(start).Round(time.Second))
	return tj, results, byName
}

// tfConfig is TF_CONFIG as the contract program read it.
type tfConfig struct {
	TFConfig struct {
		Cluster map[string][]string `json:"cluster"`
		Task    struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		} `json:"task"`
	} `json:"TF_CONFIG"`
	Chief bool `json:"chief"`
}

// TestTensorFlowContract: three pods get a TF_CONFIG that TensorFlow
// accepts (checked by the program against TensorFlow's documentation),
// each task's own address leads to its pod, and every task reaches every
// other at the address and port TF_CONFIG gives. On the Kubeflow backend
// the cluster has a chief and two workers; on the native backend three
// workers, worker 0 being the chief. Exactly one task is the chief.
func TestTensorFlowContract(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		const pods = 3
		tj, results, _ := runContract(t, e, ns, backend, trainingv1alpha1.FrameworkTensorFlow, pods)
		job := tj.Name + "-r1"
		want := map[string]int{"worker": pods}
		if backend == "kubeflow" {
			want = map[string]int{"chief": 1, "worker": pods - 1}
		}
		chiefs := 0
		for pod, r := range results {
			var cfg tfConfig
			if err := json.Unmarshal(r.Env, &cfg); err != nil {
				t.Fatalf("pod %s: %v", pod, err)
			}
			got := map[string]int{}
			for kind, addresses := range cfg.TFConfig.Cluster {
				got[kind] = len(addresses)
				for _, a := range addresses {
					host, port, err := net.SplitHostPort(a)
					if err != nil || port != "2222" || !strings.HasPrefix(host, job+"-") || !strings.HasSuffix(host, "."+ns+".svc") {
						t.Errorf("pod %s: address %q, want %s-...%s.svc:2222", pod, a, job, "."+ns)
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pod %s: cluster jobs (-want +got):\n%s", pod, diff)
			}
			if cfg.Chief {
				chiefs++
			}
		}
		if chiefs != 1 {
			t.Errorf("%d chiefs, want 1", chiefs)
		}
	})
}

// paddleEnv is Kubeflow's PaddleJob environment as the contract program
// read it, and the collective variables it derived as Paddle's launcher
// does.
type paddleEnv struct {
	Master   string            `json:"PADDLE_MASTER"`
	NNodes   string            `json:"PADDLE_NNODES"`
	JobID    string            `json:"PADDLE_JOB_ID"`
	IsMaster bool              `json:"master"`
	PodIP    string            `json:"podIP"`
	Derived  map[string]string `json:"derived"`
}

// TestPaddleContract: every pod gets Paddle's launcher variables as
// Kubeflow's PaddleJob sets them in collective mode: PADDLE_NNODES the
// pod count, PADDLE_JOB_ID the job's name, PADDLE_MASTER the master port
// (36543) on rank 0's own IP for rank 0 and on worker 0's Service for the
// others. Through that rendezvous every pod gets the collective variables
// (trainer 0 the master's node, one endpoint per pod) and every trainer
// reaches every other's endpoint. The native backend runs paddle on one
// pod only (the CRD refuses more), so there the pod is its own master.
func TestPaddleContract(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *steps.Env, ns, backend string) {
		pods := int32(3)
		if backend == "native" {
			pods = 1
		}
		tj, results, byName := runContract(t, e, ns, backend, trainingv1alpha1.FrameworkPaddle, pods)
		job := tj.Name + "-r1"
		masters := 0
		for pod, r := range results {
			var env paddleEnv
			if err := json.Unmarshal(r.Env, &env); err != nil {
				t.Fatalf("pod %s: %v", pod, err)
			}
			if env.NNodes != strconv.Itoa(int(pods)) || env.JobID != job {
				t.Errorf("pod %s: PADDLE_NNODES %q, PADDLE_JOB_ID %q; want %d, %q", pod, env.NNodes, env.JobID, pods, job)
			}
			wantMaster := job + "-worker-0:36543"
			if env.IsMaster {
				masters++
				wantMaster = net.JoinHostPort(byName[pod].Status.PodIP, "36543")
			}
			if env.Master != wantMaster {
				t.Errorf("pod %s: PADDLE_MASTER %q, want %q", pod, env.Master, wantMaster)
			}
			d := env.Derived
			if d["PADDLE_TRAINERS_NUM"] != strconv.Itoa(int(pods)) || d["PADDLE_TRAINER_ID"] != strconv.Itoa(r.Rank) ||
				len(strings.Split(d["PADDLE_TRAINER_ENDPOINTS"], ",")) != int(pods) ||
				strings.Split(d["PADDLE_TRAINER_ENDPOINTS"], ",")[r.Rank] != d["PADDLE_CURRENT_ENDPOINT"] ||
				!strings.HasPrefix(d["PADDLE_CURRENT_ENDPOINT"], byName[pod].Status.PodIP+":") {
				t.Errorf("pod %s: collective variables %v inconsistent with rank %d of %d on %s", pod, d, r.Rank, pods, byName[pod].Status.PodIP)
			}
		}
		if masters != 1 {
			t.Errorf("%d pods found their own address in PADDLE_MASTER, want 1", masters)
		}
	})
}

// jaxFacts is JAX's coordinator environment as the contract program read
// it.
type jaxFacts struct {
	Address      string `json:"JAX_COORDINATOR_ADDRESS"`
	Port         string `json:"JAX_COORDINATOR_PORT"`
	NumProcesses string `json:"JAX_NUM_PROCESSES"`
	ProcessID    string `json:"JAX_PROCESS_ID"`
	Coordinator  bool   `json:"coordinator"`
	PodIP        string `json:"podIP"`
}

// TestJAXContract: three pods of a native jax job get the variables
// jax.distributed.initialize is fed (JAX_COORDINATOR_ADDRESS read by JAX
// itself, JAX_NUM_PROCESSES and JAX_PROCESS_ID for num_processes and
// process_id, as Kubeflow Trainer's JAX runtime sets them). Process 0's
// pod is the coordinator's address (the program checks the address
// resolves to it and to no other process's pod), every process registers
// its id there on the port given (the coordinator answers only when the
// three registered, ids 0 to 2 once each), and the processes reach one
// another. The process id is the pod's completion index. The kubeflow
// backend has no JAX (training-operator v1.8 has no JAXJob).
func TestJAXContract(t *testing.T) {
	if !slices.Contains(backends(), string(trainingv1alpha1.BackendNative)) {
		t.Skip("jax runs on the native backend only, which is not under test")
	}
	e := steps.Connect(t)
	ns := e.Namespace(t, "e2e-training")
	const pods = 3
	tj, results, byName := runContract(t, e, ns, string(trainingv1alpha1.BackendNative), trainingv1alpha1.FrameworkJAX, pods)
	job := tj.Name + "-r1"
	coordinators := 0
	for pod, r := range results {
		var env jaxFacts
		if err := json.Unmarshal(r.Env, &env); err != nil {
			t.Fatalf("pod %s: %v", pod, err)
		}
		host, port, err := net.SplitHostPort(env.Address)
		if err != nil || port != "8899" || env.Port != port || !strings.HasPrefix(host, job+"-0.") || !strings.HasSuffix(host, "."+ns+".svc") {
			t.Errorf("pod %s: JAX_COORDINATOR_ADDRESS %q, JAX_COORDINATOR_PORT %q; want %s-0.....%s.svc:8899 and its port", pod, env.Address, env.Port, job, ns)
		}
		if env.NumProcesses != strconv.Itoa(pods) || env.ProcessID != strconv.Itoa(r.Rank) ||
			env.ProcessID != byName[pod].Annotations["batch.kubernetes.io/job-completion-index"] {
			t.Errorf("pod %s (index %s): JAX_NUM_PROCESSES %q, JAX_PROCESS_ID %q, process %d; want %d processes, the index as id",
				pod, byName[pod].Annotations["batch.kubernetes.io/job-completion-index"], env.NumProcesses, env.ProcessID, r.Rank, pods)
		}
		if env.Coordinator {
			coordinators++
			if r.Rank != 0 || env.PodIP != byName[pod].Status.PodIP {
				t.Errorf("pod %s: the coordinator is process %d on %s; want process 0 on the pod's IP %s", pod, r.Rank, env.PodIP, byName[pod].Status.PodIP)
			}
		}
	}
	if coordinators != 1 {
		t.Errorf("%d coordinators, want 1", coordinators)
	}
}
