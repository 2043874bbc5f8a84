package kubeflowjob

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current translation")

var settings = backend.Settings{
	OperatorName: "trainingjob-operator",
	Catalog: accelerator.Catalog{DefaultType: "a100", Classes: []accelerator.Class{
		{Type: "a100", ResourceName: "nvidia.com/gpu", NodeSelector: map[string]string{"nvidia.com/gpu.product": "A100"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
		{Type: "t4", ResourceName: "nvidia.com/gpu", NodeSelector: map[string]string{"nvidia.com/gpu.product": "T4"}},
	}},
	SharedMemorySize: resource.MustParse("2Gi"),
	RunAsUser:        1000,
}

// tjWrapper builds TrainingJobs fluently for the tables below.
type tjWrapper struct{ trainingv1alpha1.TrainingJob }

func newTJ(framework trainingv1alpha1.Framework, workers int32) *tjWrapper {
	return &tjWrapper{trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mnist", UID: "uid-1"},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: framework,
			Image:     "registry.example.com/mnist:1",
			Command:   []string{"python", "train.py"},
			Workers:   workers,
			RunPolicy: trainingv1alpha1.RunPolicy{CleanPodPolicy: trainingv1alpha1.CleanPodPolicyRunning},
		},
	}}
}

func (w *tjWrapper) accelerators(count int32, typ string) *tjWrapper {
	w.Spec.Resources = &commonv1alpha1.Resources{
		ResourceRequirements: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}},
		Accelerators:         &commonv1alpha1.Accelerators{Count: count, Type: typ},
	}
	return w
}

func (w *tjWrapper) checkpoint(mode corev1.PersistentVolumeAccessMode, claim string) *tjWrapper {
	w.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{
		AccessMode: mode, MountPath: "/checkpoints", Resume: trainingv1alpha1.ResumeAuto,
		MaxRestarts: ptr.To[int32](3), RestartBackoffSeconds: ptr.To[int32](30), DeletionPolicy: commonv1alpha1.DeletionPolicyRetain,
	}
	if claim != "" {
		w.Spec.Checkpoint.ClaimName = claim
	} else {
		w.Spec.Checkpoint.Size = ptr.To(resource.MustParse("50Gi"))
	}
	return w
}

func (w *tjWrapper) queue(name string) *tjWrapper {
	w.Spec.QueueName = name
	return w
}

func (w *tjWrapper) restarts(n int32) *tjWrapper {
	w.Status.RestartCount = n
	return w
}

func (w *tjWrapper) mutate(f func(*trainingv1alpha1.TrainingJobSpec)) *tjWrapper {
	f(&w.Spec)
	return w
}

func (w *tjWrapper) obj() *trainingv1alpha1.TrainingJob { return &w.TrainingJob }

func TestBuildGolden(t *testing.T) {
	cases := map[string]struct {
		tj     *trainingv1alpha1.TrainingJob
		run    int32
		stores []featureref.Store
	}{
		"pytorch-single": {tj: newTJ(trainingv1alpha1.FrameworkPyTorch, 1).obj(), run: 1},
		"pytorch-gpus": {
			run: 2,
			tj: newTJ(trainingv1alpha1.FrameworkPyTorch, 3).accelerators(4, "").mutate(func(s *trainingv1alpha1.TrainingJobSpec) {
				s.Args = []string{"--epochs=3"}
				s.Env = []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}}
				s.WorkingDir = "/workspace"
				s.Template = &trainingv1alpha1.PodTemplatePatch{
					// A binding label the job's references do not give is
					// stripped: only the operator binds pods to stores.
					Labels: map[string]string{"team": "vision", trainingv1alpha1.LabelRun: "spoofed",
						commonv1alpha1.FeatureStoreBindingLabel("someone-elses"): "true"},
					Annotations:        map[string]string{"sidecar.istio.io/inject": "false"},
					Volumes:            []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "imagenet"}}}},
					VolumeMounts:       []trainingv1alpha1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}},
					Tolerations:        []corev1.Toleration{{Key: "dedicated", Value: "training", Effect: corev1.TaintEffectNoSchedule}},
					NodeSelector:       map[string]string{"topology.kubernetes.io/zone": "eu-1a"},
					ServiceAccountName: "trainer",
					PriorityClassName:  "batch-high",
					ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
				}
				s.SharedMemory = &trainingv1alpha1.SharedMemory{SizeLimit: ptr.To(resource.MustParse("16Gi"))}
				s.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](86400)
				s.RunPolicy.BackoffLimit = ptr.To[int32](3)
				s.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](3600)
			}).obj(),
			stores: []featureref.Store{{Name: "features", SecretName: "features-client", Key: "feature_store.yaml"}},
		},
		"pytorch-suspended-nproc": {run: 1, tj: newTJ(trainingv1alpha1.FrameworkPyTorch, 2).mutate(func(s *trainingv1alpha1.TrainingJobSpec) {
			s.Suspend = true
			s.NprocPerNode = ptr.To[int32](2)
			s.SharedMemory = &trainingv1alpha1.SharedMemory{Disabled: true}
		}).obj()},
		"tensorflow-ps": {run: 1, tj: newTJ(trainingv1alpha1.FrameworkTensorFlow, 3).accelerators(1, "t4").mutate(func(s *trainingv1alpha1.TrainingJobSpec) {
			s.ParameterServers = ptr.To[int32](2)
		}).obj()},
		"tensorflow-single": {run: 1, tj: newTJ(trainingv1alpha1.FrameworkTensorFlow, 1).obj()},
		"xgboost":           {run: 1, tj: newTJ(trainingv1alpha1.FrameworkXGBoost, 3).obj()},
		"paddle":            {run: 1, tj: newTJ(trainingv1alpha1.FrameworkPaddle, 2).accelerators(2, "a100").obj()},
		// Part 2: a restarted run on a ReadWriteOnce claim the operator
		// created: only the Master mounts it; everyone gets the contract.
		"pytorch-checkpoint-rwo-run3": {run: 3, tj: newTJ(trainingv1alpha1.FrameworkPyTorch, 2).checkpoint(corev1.ReadWriteOnce, "").restarts(2).obj()},
		// An existing ReadWriteMany claim: every role mounts it; queued.
		"tensorflow-checkpoint-rwx-queued": {run: 1, tj: newTJ(trainingv1alpha1.FrameworkTensorFlow, 2).checkpoint(corev1.ReadWriteMany, "shared-ckpt").queue("team-a").mutate(func(s *trainingv1alpha1.TrainingJobSpec) {
			s.ParameterServers = ptr.To[int32](1)
		}).obj()},
		"paddle-queued": {run: 1, tj: newTJ(trainingv1alpha1.FrameworkPaddle, 1).queue("batch").obj()},
		// A launcher that runs ranks itself and two workers with SSH
		// servers, two slots each.
		"mpi": {run: 2, tj: newTJ(trainingv1alpha1.FrameworkMPI, 3).mutate(func(s *trainingv1alpha1.TrainingJobSpec) {
			s.Command = []string{"mpirun", "python3", "/opt/ml-platform/allreduce.py"}
			s.MPI = &trainingv1alpha1.MPISpec{SlotsPerWorker: ptr.To[int32](2)}
		}).obj()},
		"mpi-single": {run: 1, tj: newTJ(trainingv1alpha1.FrameworkMPI, 1).obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fw := Frameworks()[tc.tj.Spec.Framework]
			obj, err := Build(fw, tc.tj, tc.run, tc.stores, settings)
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden file missing (run go test -update once): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("generated %s changed (-golden +now); a changed translation restarts running jobs after an upgrade:\n%s", fw.Kind(), diff)
			}

			// Repeated builds from a copy give the same object.
			again, err := Build(fw, tc.tj.DeepCopy(), tc.run, tc.stores, settings)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(obj, again); diff != "" {
				t.Errorf("translation is not deterministic:\n%s", diff)
			}

			// Every pod passes the restricted Pod Security Standard.
			_, _ = fw.Parts(obj)
			for role, rs := range replicaSpecs(t, obj) {
				if err := podsecurity.CheckRestricted(&rs.Template.ObjectMeta, &rs.Template.Spec); err != nil {
					t.Errorf("%s pods: %v", role, err)
				}
			}
		})
	}
}

// TestBuildOfAPart1JobIgnoresPart2Status proves that what the restart and
// queue logic writes into status never reaches the generated job of a
// TrainingJob without a checkpoint or queue: its job stays byte-identical to
// the golden files written before those fields existed (git shows them
// unchanged since part 1), so upgrading the operator restarts no running
// job.
func TestBuildOfAPart1JobIgnoresPart2Status(t *testing.T) {
	for _, name := range []string{"pytorch-single", "tensorflow-single", "xgboost"} {
		t.Run(name, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			fw := map[string]trainingv1alpha1.Framework{"pytorch-single": "pytorch", "tensorflow-single": "tensorflow", "xgboost": "xgboost"}[name]
			workers := map[string]int32{"pytorch-single": 1, "tensorflow-single": 1, "xgboost": 3}[name]
			tj := newTJ(fw, workers).restarts(4).obj()
			tj.Status.Run = 5
			tj.Status.CheckpointClaim = "leftover"
			tj.Status.NextRunTime = &metav1.Time{}
			tj.Status.Runs = []trainingv1alpha1.RunRecord{{Run: 1, Reason: "Preempted"}}
			tj.Status.Conditions = []metav1.Condition{{Type: trainingv1alpha1.ConditionQueued, Status: metav1.ConditionFalse, Reason: "Admitted"}}
			obj, err := Build(Frameworks()[fw], tj, 1, nil, settings)
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(golden), string(got)); diff != "" {
				t.Errorf("status leaked into the generated job (-golden +now):\n%s", diff)
			}
		})
	}
}

func TestCheckpointClaimName(t *testing.T) {
	cases := map[string]struct {
		tj   *trainingv1alpha1.TrainingJob
		want string
	}{
		"none":     {tj: newTJ("pytorch", 1).obj(), want: ""},
		"created":  {tj: newTJ("pytorch", 1).checkpoint(corev1.ReadWriteOnce, "").obj(), want: "mnist-checkpoint"},
		"existing": {tj: newTJ("pytorch", 1).checkpoint(corev1.ReadWriteMany, "mine").obj(), want: "mine"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := backend.CheckpointClaimName(tc.tj); got != tc.want {
				t.Errorf("CheckpointClaimName = %q, want %q", got, tc.want)
			}
		})
	}
}

func replicaSpecs(t *testing.T, obj any) map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec {
	t.Helper()
	switch j := obj.(type) {
	case *kubeflowv1.PyTorchJob:
		return j.Spec.PyTorchReplicaSpecs
	case *kubeflowv1.TFJob:
		return j.Spec.TFReplicaSpecs
	case *kubeflowv1.XGBoostJob:
		return j.Spec.XGBReplicaSpecs
	case *kubeflowv1.PaddleJob:
		return j.Spec.PaddleReplicaSpecs
	case *kubeflowv1.MPIJob:
		return j.Spec.MPIReplicaSpecs
	}
	t.Fatalf("unexpected kind %T", obj)
	return nil
}

func TestRoles(t *testing.T) {
	cases := map[string]struct {
		spec trainingv1alpha1.TrainingJobSpec
		want []Role
	}{
		"pytorch one":    {spec: trainingv1alpha1.TrainingJobSpec{Framework: "pytorch", Workers: 1}, want: []Role{{"Master", 1}}},
		"pytorch four":   {spec: trainingv1alpha1.TrainingJobSpec{Framework: "pytorch", Workers: 4}, want: []Role{{"Master", 1}, {"Worker", 3}}},
		"tf with ps":     {spec: trainingv1alpha1.TrainingJobSpec{Framework: "tensorflow", Workers: 2, ParameterServers: ptr.To[int32](1)}, want: []Role{{"Chief", 1}, {"Worker", 1}, {"PS", 1}}},
		"tf zero ps":     {spec: trainingv1alpha1.TrainingJobSpec{Framework: "tensorflow", Workers: 1, ParameterServers: ptr.To[int32](0)}, want: []Role{{"Chief", 1}}},
		"xgboost":        {spec: trainingv1alpha1.TrainingJobSpec{Framework: "xgboost", Workers: 2}, want: []Role{{"Master", 1}, {"Worker", 1}}},
		"paddle workers": {spec: trainingv1alpha1.TrainingJobSpec{Framework: "paddle", Workers: 3}, want: []Role{{"Worker", 3}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Frameworks()[tc.spec.Framework].Roles(&tc.spec)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildRejectsUnknownAcceleratorType(t *testing.T) {
	tj := newTJ(trainingv1alpha1.FrameworkPyTorch, 1).accelerators(1, "h100").obj()
	_, err := Build(pytorch{}, tj, 1, nil, settings)
	var invalid *backend.InvalidSpecError
	if !errors.As(err, &invalid) {
		t.Fatalf("want an InvalidSpecError, got %v", err)
	}
	if want := `accelerator type "h100" is not offered by this cluster (configured types: a100, t4)`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// TestMPILauncherReachesEveryWorkerByName checks the names in the
// launcher's hostfile against what training-operator v1.8.1 makes of the
// MPIJob: worker pods named <job>-worker-<i>, labelled with their replica
// type and index, and without a hostname, so that a subdomain gives them
// no DNS name. Each hostfile entry must be the name of a headless
// companion Service that selects that worker and no other pod, which is a
// name the cluster's DNS serves.
func TestMPILauncherReachesEveryWorkerByName(t *testing.T) {
	tj := newTJ(trainingv1alpha1.FrameworkMPI, 3).obj()
	obj, err := Build(mpiJob{}, tj, 1, nil, settings)
	if err != nil {
		t.Fatal(err)
	}
	job := obj.(*kubeflowv1.MPIJob)
	services := map[string]*corev1.Service{}
	for _, o := range NewBackend(settings, nil).Companions(tj, 1) {
		svc := o.(*corev1.Service)
		services[svc.Name+"."+svc.Namespace+".svc"] = svc
	}
	var hostfile string
	for _, e := range job.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeLauncher].Template.Spec.Containers[0].Env {
		if e.Name == "MLPLATFORM_MPI_HOSTFILE" {
			hostfile = e.Value
		}
	}
	launcher := job.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeLauncher].Template
	workers := job.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker]
	// The labels training-operator v1.8.1 gives its pods (newWorker,
	// getOrCreateWorker, newLauncher).
	podLabels := func(tmpl corev1.PodTemplateSpec, role string, index int) labels.Set {
		l := labels.Set(maps.Clone(tmpl.Labels))
		l[kubeflowv1.ReplicaTypeLabel] = role
		if index >= 0 {
			l[kubeflowv1.ReplicaIndexLabel] = strconv.Itoa(index)
		}
		return l
	}
	lines := strings.Split(strings.TrimSuffix(hostfile, "\n"), "\n")
	if len(lines) != int(*workers.Replicas)+1 || lines[0] != "localhost slots=1" {
		t.Fatalf("hostfile %q: want localhost and %d workers", hostfile, *workers.Replicas)
	}
	if len(services) != int(*workers.Replicas) {
		t.Errorf("%d Services for %d workers", len(services), *workers.Replicas)
	}
	for i, line := range lines[1:] {
		host, _, _ := strings.Cut(line, " ")
		svc := services[host]
		if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
			t.Errorf("hostfile entry %q is no headless Service publishing unready pods: %+v", line, svc)
			continue
		}
		selector := labels.SelectorFromSet(svc.Spec.Selector)
		if !selector.Matches(podLabels(workers.Template, "worker", i)) {
			t.Errorf("Service %s (selector %v) does not select worker %d", svc.Name, svc.Spec.Selector, i)
		}
		if selector.Matches(podLabels(workers.Template, "worker", i+1)) || selector.Matches(podLabels(launcher, "launcher", -1)) {
			t.Errorf("Service %s (selector %v) selects more than worker %d", svc.Name, svc.Spec.Selector, i)
		}
		// training-operator v1.8.1's worker pod name (getOrCreateWorker).
		if want := fmt.Sprintf("%s-worker-%d", job.Name, i); svc.Name != want {
			t.Errorf("Service %s, want the pod's name %s", svc.Name, want)
		}
	}
	if got := NewBackend(settings, nil).Companions(newTJ(trainingv1alpha1.FrameworkPyTorch, 2).obj(), 1); got != nil {
		t.Errorf("pytorch got companions %v: Kubeflow makes its Services", got)
	}
}

// TestObserveTellsTheDeadlineFromOtherFailures: the training-operator
// fails a job that outlived runPolicy.activeDeadlineSeconds with the
// reason of any failure, and says why only in the message.
func TestObserveTellsTheDeadlineFromOtherFailures(t *testing.T) {
	failedWith := func(msg string) *kubeflowv1.PyTorchJob {
		return &kubeflowv1.PyTorchJob{Status: kubeflowv1.JobStatus{Conditions: []kubeflowv1.JobCondition{
			{Type: kubeflowv1.JobFailed, Status: corev1.ConditionTrue, Reason: "PyTorchJobFailed", Message: msg},
		}}}
	}
	b := NewBackend(settings, nil)
	if st := b.Observe(failedWith("Job j-r1 has failed because it was active longer than specified deadline")); st.Failed == nil || !st.DeadlineExceeded {
		t.Errorf("deadline: %+v, want a failure past the deadline", st)
	}
	if st := b.Observe(failedWith("PyTorchJob j-r1 is failed because 1 Worker replica(s) failed.")); st.Failed == nil || st.DeadlineExceeded {
		t.Errorf("a replica failed: %+v, want a failure within the deadline", st)
	}
}
