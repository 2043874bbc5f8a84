package validation

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/mpi"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = trainingv1alpha1.AddToScheme(scheme)
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator", "files", "crds")},
	}, &env)
}

func setup(t *testing.T) (client.Client, string) {
	t.Helper()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return c, ns.Name
}

func valid(ns, name string) *trainingv1alpha1.TrainingJob {
	return &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch,
			Image:     "registry.example.com/train:1",
		},
	}
}

func TestCreateRules(t *testing.T) {
	c, ns := setup(t)
	cases := map[string]struct {
		name    string
		mutate  func(*trainingv1alpha1.TrainingJob)
		wantErr string // empty: accepted
	}{
		"minimal pytorch": {},
		"every field": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.Workers = 4
			tj.Spec.NprocPerNode = ptr.To[int32](8)
			tj.Spec.Command = []string{"python", "train.py"}
			tj.Spec.Args = []string{"--epochs=1"}
			tj.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
			tj.Spec.WorkingDir = "/work"
			tj.Spec.Resources = &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 8, Type: "a100"}}
			tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{
				Volumes:      []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				VolumeMounts: []trainingv1alpha1.VolumeMount{{Name: "data", MountPath: "/data"}},
				NodeSelector: map[string]string{"zone": "a"},
			}
			tj.Spec.SharedMemory = &trainingv1alpha1.SharedMemory{SizeLimit: ptr.To(resource.MustParse("8Gi"))}
			tj.Spec.RunPolicy = trainingv1alpha1.RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600), BackoffLimit: ptr.To[int32](3), TTLSecondsAfterFinished: ptr.To[int32](60), CleanPodPolicy: trainingv1alpha1.CleanPodPolicyAll}
			tj.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "fs"}}}
		}},
		"tensorflow with parameter servers": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.Framework = trainingv1alpha1.FrameworkTensorFlow
			tj.Spec.ParameterServers = ptr.To[int32](2)
		}},
		"xgboost with two workers": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.Framework = trainingv1alpha1.FrameworkXGBoost
			tj.Spec.Workers = 2
		}},
		"paddle": {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Framework = trainingv1alpha1.FrameworkPaddle }},
		"unknown framework": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Framework = "mxnet" },
			wantErr: `spec.framework: Unsupported value: "mxnet"`,
		},
		"mpi with a launcher command and slots": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.Framework = trainingv1alpha1.FrameworkMPI
			tj.Spec.Workers = 512
			tj.Spec.Command = []string{"mpirun", "python3", "train.py"}
			tj.Spec.MPI = &trainingv1alpha1.MPISpec{SlotsPerWorker: ptr.To[int32](8)}
		}},
		"mpi without a command": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Framework = trainingv1alpha1.FrameworkMPI },
			wantErr: "framework mpi needs command: the launcher runs it over the workers",
		},
		"mpi with an empty command": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework = trainingv1alpha1.FrameworkMPI
				tj.Spec.Command = []string{}
			},
			wantErr: "framework mpi needs command",
		},
		"mpi settings on pytorch": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.MPI = &trainingv1alpha1.MPISpec{} },
			wantErr: "mpi is only supported with framework mpi",
		},
		"mpi with too many workers": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework = trainingv1alpha1.FrameworkMPI
				tj.Spec.Command = []string{"mpirun", "a.out"}
				tj.Spec.Workers = 513
			},
			wantErr: "framework mpi supports at most 512 workers",
		},
		"mpi with zero slots": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework = trainingv1alpha1.FrameworkMPI
				tj.Spec.Command = []string{"mpirun", "a.out"}
				tj.Spec.MPI = &trainingv1alpha1.MPISpec{SlotsPerWorker: ptr.To[int32](0)}
			},
			wantErr: "spec.mpi.slotsPerWorker: Invalid value",
		},
		"mpi with nprocPerNode": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework = trainingv1alpha1.FrameworkMPI
				tj.Spec.Command = []string{"mpirun", "a.out"}
				tj.Spec.NprocPerNode = ptr.To[int32](2)
			},
			wantErr: "nprocPerNode is only supported with framework pytorch",
		},
		"empty image": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Image = "" },
			wantErr: "spec.image: Invalid value",
		},
		"negative workers": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Workers = -1 },
			wantErr: "workers must be at least 1",
		},
		"too many workers": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Workers = 1025 },
			wantErr: "workers must be at most 1024",
		},
		"nprocPerNode with tensorflow": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework = trainingv1alpha1.FrameworkTensorFlow
				tj.Spec.NprocPerNode = ptr.To[int32](2)
			},
			wantErr: "nprocPerNode is only supported with framework pytorch",
		},
		"parameterServers with pytorch": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.ParameterServers = ptr.To[int32](1) },
			wantErr: "parameterServers is only supported with framework tensorflow",
		},
		"xgboost with one worker": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Framework = trainingv1alpha1.FrameworkXGBoost },
			wantErr: "framework xgboost needs workers of at least 2",
		},
		"mount of an undeclared volume": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{VolumeMounts: []trainingv1alpha1.VolumeMount{{Name: "data", MountPath: "/data"}}}
			},
			wantErr: "every volumeMounts[].name must name one of template.volumes",
		},
		"reserved volume name": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{Volumes: []corev1.Volume{{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}
			},
			wantErr: "volume names dshm, featurestore-* and mlplatform-* are reserved",
		},
		"reserved feature store volume name": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{Volumes: []corev1.Volume{{Name: "featurestore-x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}
			},
			wantErr: "volume names dshm, featurestore-* and mlplatform-* are reserved",
		},
		"mount on /dev/shm": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{
					Volumes:      []corev1.Volume{{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
					VolumeMounts: []trainingv1alpha1.VolumeMount{{Name: "shm", MountPath: "/dev/shm"}},
				}
			},
			wantErr: "are reserved for the operator's mounts",
		},
		"accelerator type without count": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Resources = &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Type: "a100"}}
			},
			wantErr: "accelerators.type needs accelerators.count greater than 0",
		},
		"unknown clean pod policy": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.RunPolicy.CleanPodPolicy = "Sometimes" },
			wantErr: `spec.runPolicy.cleanPodPolicy: Unsupported value: "Sometimes"`,
		},
		"negative backoff limit": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.RunPolicy.BackoffLimit = ptr.To[int32](-1) },
			wantErr: "spec.runPolicy.backoffLimit: Invalid value",
		},
		"zero active deadline": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](0) },
			wantErr: "spec.runPolicy.activeDeadlineSeconds: Invalid value",
		},
		"largest active deadline": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](trainingv1alpha1.MaxActiveDeadlineSeconds)
			},
		},
		"active deadline that overflows the child's nanoseconds": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](trainingv1alpha1.MaxActiveDeadlineSeconds + 1)
			},
			wantErr: "runPolicy.activeDeadlineSeconds must be at most 9223372036",
		},
		"largest ttl": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](math.MaxInt32)
			},
		},
		"zero cpu request": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Resources = resources(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")}, nil)
			},
		},
		"requests equal to limits in other units": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Resources = resources(
					corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
					corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceEphemeralStorage: resource.MustParse("1024Mi")})
			},
		},
		"negative cpu request": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Resources = resources(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}, nil)
			},
			wantErr: "resources.requests of cpu, memory and ephemeral-storage may not be negative",
		},
		"negative ephemeral storage limit": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Resources = resources(nil, corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("-2Mi")})
			},
			wantErr: "resources.limits of cpu, memory and ephemeral-storage may not be negative",
		},
		"zero memory limit": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Resources = resources(nil, corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("0")})
			},
			wantErr: "resources.limits of cpu and memory must be greater than 0",
		},
		"ephemeral storage request above its limit": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Resources = resources(
					corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("2Gi")},
					corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")})
			},
			wantErr: "resources.requests of cpu, memory and ephemeral-storage may not exceed their limits",
		},
		"resource claims": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Resources = &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}
			},
			wantErr: "resources.claims is not supported",
		},
		"smallest shared memory": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.SharedMemory = &trainingv1alpha1.SharedMemory{SizeLimit: ptr.To(resource.MustParse("1"))}
			},
		},
		"zero shared memory": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.SharedMemory = &trainingv1alpha1.SharedMemory{SizeLimit: ptr.To(resource.MustParse("0"))}
			},
			wantErr: "sharedMemory.sizeLimit must be greater than 0",
		},
		"largest checkpoint": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Ei"))}
			},
		},
		"checkpoint beyond int64 bytes": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("9Ei"))}
			},
			wantErr: "checkpoint.size must be at most 1Ei",
		},
		"negative ttl": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](-1) },
			wantErr: "spec.runPolicy.ttlSecondsAfterFinished: Invalid value",
		},
		"duplicate feature store": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				ref := commonv1alpha1.FeatureStoreReference{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "fs"}}
				tj.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{ref, ref}
			},
			wantErr: "spec.featureStores[1]: Duplicate value",
		},
		"checkpoint created by the operator": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("10Gi")), StorageClassName: ptr.To("fast"), DeletionPolicy: commonv1alpha1.DeletionPolicyDelete}
		}},
		"checkpoint on an existing rwx claim": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{ClaimName: "mine", AccessMode: corev1.ReadWriteMany, MountPath: "/ckpt", Resume: trainingv1alpha1.ResumeNever, MaxRestarts: ptr.To[int32](0)}
		}},
		"paddle one worker on a rwo checkpoint": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.Framework = trainingv1alpha1.FrameworkPaddle
			tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi"))}
		}},
		"queue name": {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.QueueName = "team-a" }},
		"checkpoint with neither claim nor size": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{} },
			wantErr: "checkpoint needs exactly one of claimName (an existing claim) and size",
		},
		"checkpoint with both claim and size": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{ClaimName: "mine", Size: ptr.To(resource.MustParse("1Gi"))}
			},
			wantErr: "checkpoint needs exactly one of claimName (an existing claim) and size",
		},
		"storage class for an existing claim": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{ClaimName: "mine", StorageClassName: ptr.To("fast")}
			},
			wantErr: "checkpoint.storageClassName applies only to a claim the operator creates",
		},
		"deleting an existing claim": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{ClaimName: "mine", DeletionPolicy: commonv1alpha1.DeletionPolicyDelete}
			},
			wantErr: "checkpoint.deletionPolicy Delete applies only to a claim the operator creates",
		},
		"tiny checkpoint": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Ki"))}
			},
			wantErr: "checkpoint.size must be at least 1Mi",
		},
		"checkpoint mount on /dev/shm": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi")), MountPath: "/dev/shm"}
			},
			wantErr: "checkpoint.mountPath: /dev/shm, /etc/mlplatform",
		},
		"relative checkpoint mount": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi")), MountPath: "ckpt"}
			},
			wantErr: "checkpoint.mountPath must be an absolute path",
		},
		"unknown access mode": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi")), AccessMode: corev1.ReadOnlyMany}
			},
			wantErr: `spec.checkpoint.accessMode: Unsupported value: "ReadOnlyMany"`,
		},
		"too many restarts": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi")), MaxRestarts: ptr.To[int32](101)}
			},
			wantErr: "spec.checkpoint.maxRestarts: Invalid value",
		},
		"paddle workers on a ReadWriteOnce checkpoint": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework = trainingv1alpha1.FrameworkPaddle
				tj.Spec.Workers = 2
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi"))}
			},
			wantErr: "framework paddle with more than one worker needs checkpoint.accessMode ReadWriteMany",
		},
		"volume named checkpoint": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi"))}
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{Volumes: []corev1.Volume{{Name: "checkpoint", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}
			},
			wantErr: "volume name checkpoint is reserved",
		},
		"template mount on the checkpoint path": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi"))}
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{
					Volumes:      []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
					VolumeMounts: []trainingv1alpha1.VolumeMount{{Name: "data", MountPath: "/checkpoints"}},
				}
			},
			wantErr: "checkpoint.mountPath is already used by template.volumeMounts",
		},
		"env of the checkpoint contract": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi"))}
				tj.Spec.Env = []corev1.EnvVar{{Name: "MLPLATFORM_RESUME", Value: "true"}}
			},
			wantErr: "env names starting with MLPLATFORM_ are reserved",
		},
		"queued mpi on the kubeflow backend": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework, tj.Spec.Backend, tj.Spec.QueueName = trainingv1alpha1.FrameworkMPI, trainingv1alpha1.BackendKubeflow, "team-a"
				tj.Spec.Command = []string{"mpirun", "a.out"}
			},
			wantErr: "framework mpi with queueName cannot run on the kubeflow backend",
		},
		"queued mpi on the native backend": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.Framework, tj.Spec.Backend, tj.Spec.QueueName = trainingv1alpha1.FrameworkMPI, trainingv1alpha1.BackendNative, "team-a"
			tj.Spec.Command = []string{"mpirun", "a.out"}
		}},
		"invalid queue name": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.QueueName = "Team A" },
			wantErr: "spec.queueName: Invalid value",
		},
		"name too long": {
			name:    strings.Repeat("a", 41),
			wantErr: "metadata.name must be at most 40 characters",
		},
		"name starting with a digit": {
			name:    "1job",
			wantErr: "metadata.name must start with a letter",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objName := tc.name
			if objName == "" {
				objName = strings.ReplaceAll(name, " ", "-")
				objName = objName[:min(len(objName), 40)]
			}
			tj := valid(ns, objName)
			if tc.mutate != nil {
				tc.mutate(tj)
			}
			err := c.Create(t.Context(), tj)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("valid TrainingJob rejected: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("invalid TrainingJob accepted, want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// resources builds the container resources of a TrainingJob.
func resources(requests, limits corev1.ResourceList) *commonv1alpha1.Resources {
	return &commonv1alpha1.Resources{ResourceRequirements: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func TestDefaults(t *testing.T) {
	c, ns := setup(t)
	tj := valid(ns, "defaults")
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := &trainingv1alpha1.TrainingJob{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(tj), got); err != nil {
		t.Fatal(err)
	}
	want := trainingv1alpha1.TrainingJobSpec{
		Framework: trainingv1alpha1.FrameworkPyTorch,
		Image:     "registry.example.com/train:1",
		Workers:   1,
		RunPolicy: trainingv1alpha1.RunPolicy{CleanPodPolicy: trainingv1alpha1.CleanPodPolicyRunning},
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("defaulted spec (-want +got):\n%s", diff)
	}
}

func TestCheckpointDefaults(t *testing.T) {
	c, ns := setup(t)
	tj := valid(ns, "checkpoint-defaults")
	tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("5Gi"))}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := &trainingv1alpha1.TrainingJob{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(tj), got); err != nil {
		t.Fatal(err)
	}
	want := &trainingv1alpha1.Checkpoint{
		Size: ptr.To(resource.MustParse("5Gi")), AccessMode: corev1.ReadWriteOnce, MountPath: "/checkpoints",
		Resume: trainingv1alpha1.ResumeAuto, MaxRestarts: ptr.To[int32](3), RestartBackoffSeconds: ptr.To[int32](30),
		DeletionPolicy: commonv1alpha1.DeletionPolicyRetain,
	}
	if diff := cmp.Diff(want, got.Spec.Checkpoint); diff != "" {
		t.Errorf("defaulted checkpoint (-want +got):\n%s", diff)
	}
}

// TestQueueNameIsImmutableWhileAdmitted drives the status as the operator
// writes it: the queue can change before the first run and while the job
// waits in its queue, not once Kueue admitted it.
func TestQueueNameIsImmutableWhileAdmitted(t *testing.T) {
	c, ns := setup(t)
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}
	}
	created := cond("Created", metav1.ConditionTrue, "JobCreated")
	cases := map[string]struct {
		status  []metav1.Condition
		wantErr bool
	}{
		"before the first run":    {},
		"waiting in its queue":    {status: []metav1.Condition{created, cond("Queued", metav1.ConditionTrue, "Waiting")}},
		"evicted, queued again":   {status: []metav1.Condition{created, cond("Queued", metav1.ConditionTrue, "Evicted")}},
		"admitted":                {status: []metav1.Condition{created, cond("Queued", metav1.ConditionFalse, "Admitted")}, wantErr: true},
		"running without a queue": {status: []metav1.Condition{created}, wantErr: true},
		"suspended, run ended":    {status: []metav1.Condition{cond("Created", metav1.ConditionFalse, "JobNotCreated")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := valid(ns, "queue-"+strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), ",", ""))
			tj.Spec.QueueName = "a"
			if err := c.Create(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
			if tc.status != nil {
				tj.Status.Conditions = tc.status
				if err := c.Status().Update(t.Context(), tj); err != nil {
					t.Fatal(err)
				}
			}
			tj.Spec.QueueName = "b"
			err := c.Update(t.Context(), tj)
			switch {
			case tc.wantErr && err == nil:
				t.Fatal("queue change accepted while admitted")
			case tc.wantErr && !strings.Contains(err.Error(), "spec.queueName can change only while the job waits in its queue"):
				t.Fatalf("error %q lacks the explanation", err)
			case !tc.wantErr && err != nil:
				t.Fatalf("queue change rejected: %v", err)
			}
		})
	}
}

func TestUpdateRules(t *testing.T) {
	c, ns := setup(t)
	base := func(tj *trainingv1alpha1.TrainingJob) {
		tj.Spec.Workers = 2
		tj.Spec.Command = []string{"python"}
		tj.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		tj.Spec.NprocPerNode = ptr.To[int32](1)
		tj.Spec.Resources = &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 1}}
		tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{NodeSelector: map[string]string{"a": "b"}}
		tj.Spec.RunPolicy.BackoffLimit = ptr.To[int32](1)
		tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](100)
	}
	cases := map[string]struct {
		mutate  func(*trainingv1alpha1.TrainingJob)
		wantErr string
	}{
		"suspend": {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Suspend = true }},
		"ttl":     {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](5) }},
		"cleanPodPolicy": {mutate: func(tj *trainingv1alpha1.TrainingJob) {
			tj.Spec.RunPolicy.CleanPodPolicy = trainingv1alpha1.CleanPodPolicyAll
		}},
		"labels": {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Labels = map[string]string{"team": "x"} }},
		"framework": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework = trainingv1alpha1.FrameworkPaddle
				tj.Spec.NprocPerNode = nil
			},
			wantErr: "framework is immutable",
		},
		"image":   {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Image = "other:2" }, wantErr: "image is immutable"},
		"workers": {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Workers = 3 }, wantErr: "workers is immutable"},
		"command changed": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Command = []string{"bash"} },
			wantErr: "command is immutable",
		},
		"command removed": {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Command = nil }, wantErr: "command is immutable"},
		"args added":      {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Args = []string{"x"} }, wantErr: "args is immutable"},
		"env":             {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Env[0].Value = "2" }, wantErr: "env is immutable"},
		"workingDir":      {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.WorkingDir = "/x" }, wantErr: "workingDir is immutable"},
		"nprocPerNode":    {mutate: func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.NprocPerNode = ptr.To[int32](2) }, wantErr: "nprocPerNode is immutable"},
		"parameterServers": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Framework = trainingv1alpha1.FrameworkTensorFlow
				tj.Spec.NprocPerNode = nil
				tj.Spec.ParameterServers = ptr.To[int32](1)
			},
			wantErr: "parameterServers is immutable",
		},
		"resources": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Resources.Accelerators.Count = 2 },
			wantErr: "resources is immutable",
		},
		"template": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.Template.NodeSelector["a"] = "c" },
			wantErr: "template is immutable",
		},
		"sharedMemory": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.SharedMemory = &trainingv1alpha1.SharedMemory{Disabled: true}
			},
			wantErr: "sharedMemory is immutable",
		},
		"featureStores": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "x"}}}
			},
			wantErr: "featureStores is immutable",
		},
		"checkpoint added": {
			mutate: func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi"))}
			},
			wantErr: "checkpoint is immutable",
		},
		"backoffLimit": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.RunPolicy.BackoffLimit = ptr.To[int32](2) },
			wantErr: "runPolicy.backoffLimit is immutable",
		},
		"activeDeadlineSeconds": {
			mutate:  func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](5) },
			wantErr: "runPolicy.activeDeadlineSeconds is immutable",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := valid(ns, strings.ToLower(strings.ReplaceAll(name, " ", "-")))
			base(tj)
			if err := c.Create(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
			tc.mutate(tj)
			err := c.Update(context.Background(), tj)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("valid update rejected: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("invalid update accepted, want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestIntegersBeyondTheirGoType sends numbers that no Go client can build:
// an int32 field above 2^31-1 that the API server stored would break the
// operator's decoding of every TrainingJob in its cache, not just this one.
func TestIntegersBeyondTheirGoType(t *testing.T) {
	c, ns := setup(t)
	cases := map[string]struct {
		path    []string
		value   int64
		wantErr string
	}{
		"ttl above int32":                {path: []string{"spec", "runPolicy", "ttlSecondsAfterFinished"}, value: math.MaxInt32 + 1, wantErr: "spec.runPolicy.ttlSecondsAfterFinished: Invalid value"},
		"active deadline near int64 max": {path: []string{"spec", "runPolicy", "activeDeadlineSeconds"}, value: math.MaxInt64, wantErr: "runPolicy.activeDeadlineSeconds must be at most 9223372036"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": trainingv1alpha1.GroupVersion.String(), "kind": "TrainingJob",
				"metadata": map[string]any{"namespace": ns, "name": strings.ReplaceAll(name, " ", "-")},
				"spec":     map[string]any{"framework": "pytorch", "image": "registry.example.com/train:1"},
			}}
			if err := unstructured.SetNestedField(obj.Object, tc.value, tc.path...); err != nil {
				t.Fatal(err)
			}
			err := c.Create(t.Context(), obj)
			switch {
			case err == nil:
				t.Fatalf("%s = %d accepted", strings.Join(tc.path, "."), tc.value)
			case !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestMPISettingsAreImmutable: the slots shape every pod of a run, so a
// change could only take effect by a restart.
func TestMPISettingsAreImmutable(t *testing.T) {
	c, ns := setup(t)
	tj := valid(ns, "mpi-immutable")
	tj.Spec.Framework = trainingv1alpha1.FrameworkMPI
	tj.Spec.Command = []string{"mpirun", "a.out"}
	tj.Spec.MPI = &trainingv1alpha1.MPISpec{SlotsPerWorker: ptr.To[int32](2)}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*trainingv1alpha1.TrainingJob){
		"slots changed": func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.MPI.SlotsPerWorker = ptr.To[int32](4) },
		"mpi removed":   func(tj *trainingv1alpha1.TrainingJob) { tj.Spec.MPI = nil },
	} {
		t.Run(name, func(t *testing.T) {
			changed := tj.DeepCopy()
			mutate(changed)
			err := c.Update(t.Context(), changed)
			if err == nil || !strings.Contains(err.Error(), "mpi is immutable") {
				t.Errorf("update: %v, want the refusal \"mpi is immutable\"", err)
			}
		})
	}
}

// TestRunPolicyBoundsCannotBeAddedOrRemoved: "immutable" covers adding and
// removing the field, not only changing its value, and a job created with
// no runPolicy at all (as kubectl sends it) too.
func TestRunPolicyBoundsCannotBeAddedOrRemoved(t *testing.T) {
	c, ns := setup(t)
	deadline := func(rp *trainingv1alpha1.RunPolicy) { rp.ActiveDeadlineSeconds = ptr.To[int64](60) }
	backoff := func(rp *trainingv1alpha1.RunPolicy) { rp.BackoffLimit = ptr.To[int32](1) }
	cases := map[string]struct {
		create, update func(*trainingv1alpha1.RunPolicy)
		wantErr        string
	}{
		"deadline added":     {update: deadline, wantErr: "runPolicy.activeDeadlineSeconds is immutable"},
		"deadline removed":   {create: deadline, update: func(rp *trainingv1alpha1.RunPolicy) { rp.ActiveDeadlineSeconds = nil }, wantErr: "runPolicy.activeDeadlineSeconds is immutable"},
		"backoffLimit added": {update: backoff, wantErr: "runPolicy.backoffLimit is immutable"},
		"backoffLimit removed": {create: backoff, update: func(rp *trainingv1alpha1.RunPolicy) { rp.BackoffLimit = nil },
			wantErr: "runPolicy.backoffLimit is immutable"},
		"ttl added": {update: func(rp *trainingv1alpha1.RunPolicy) { rp.TTLSecondsAfterFinished = ptr.To[int32](5) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := valid(ns, "rp-"+strings.ReplaceAll(strings.ToLower(name), " ", "-"))
			if tc.create != nil {
				tc.create(&tj.Spec.RunPolicy)
			}
			if err := c.Create(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
			tc.update(&tj.Spec.RunPolicy)
			assertRefused(t, c.Update(t.Context(), tj), tc.wantErr)
		})
	}
	t.Run("deadline added to a job without runPolicy", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": trainingv1alpha1.GroupVersion.String(), "kind": "TrainingJob",
			"metadata": map[string]any{"namespace": ns, "name": "rp-none"},
			"spec":     map[string]any{"framework": "pytorch", "image": "registry.example.com/train:1"},
		}}
		if err := c.Create(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, int64(60), "spec", "runPolicy", "activeDeadlineSeconds"); err != nil {
			t.Fatal(err)
		}
		assertRefused(t, c.Update(t.Context(), u), "runPolicy.activeDeadlineSeconds is immutable")
	})
}

// assertRefused checks an API answer: accepted when wantErr is empty, else
// refused with a message containing wantErr.
func assertRefused(t *testing.T, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("valid request rejected: %v", err)
	case wantErr != "" && err == nil:
		t.Fatalf("invalid request accepted, want an error containing %q", wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("error %q does not contain %q", err, wantErr)
	}
}

// TestOperatorsNamesAreReserved creates a job whose template, or
// checkpoint, uses each volume name and mount path that the operator gives
// its own pods' volumes: the API server would refuse the run's child over
// the duplicate after the job was accepted, and the template is immutable.
// The names come from the code that uses them, so the CRD's reserved list
// cannot fall behind it.
func TestOperatorsNamesAreReserved(t *testing.T) {
	c, ns := setup(t)
	emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	i := 0
	create := func(t *testing.T, mutate func(*trainingv1alpha1.TrainingJob), wantErr string) {
		t.Helper()
		i++
		tj := valid(ns, fmt.Sprintf("reserved-%d", i))
		mutate(tj)
		assertRefused(t, c.Create(t.Context(), tj), wantErr)
	}
	for _, name := range []string{backend.SharedMemoryVolume, featureref.VolumeName("store"), progress.TokenVolume, mpi.KeysVolume, mpi.RunVolume, "mlplatform-future"} {
		t.Run("volume "+name, func(t *testing.T) {
			create(t, func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{Volumes: []corev1.Volume{{Name: name, VolumeSource: emptyDir}}}
			}, "volume names dshm, featurestore-* and mlplatform-* are reserved")
		})
	}
	paths := []string{"/dev/shm", featureref.MountPath("store"), progress.TokenDir, mpi.KeysPath, mpi.RunPath, mpi.RunPath + "/x", "/var/run/secrets/mlplatform.dev"}
	for _, path := range paths {
		t.Run("template mount "+path, func(t *testing.T) {
			create(t, func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{
					Volumes:      []corev1.Volume{{Name: "data", VolumeSource: emptyDir}},
					VolumeMounts: []trainingv1alpha1.VolumeMount{{Name: "data", MountPath: path}},
				}
			}, "are reserved for the operator's mounts")
		})
		t.Run("checkpoint mount "+path, func(t *testing.T) {
			create(t, func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi")), MountPath: path}
			}, "are reserved for the operator's mounts")
		})
	}
	for _, path := range []string{"/data", "/var/lib/mlplatform", "/var/run/secrets/other", "/etc/mlplatformx"} {
		t.Run("free mount "+path, func(t *testing.T) {
			create(t, func(tj *trainingv1alpha1.TrainingJob) {
				tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{
					Volumes:      []corev1.Volume{{Name: "data", VolumeSource: emptyDir}},
					VolumeMounts: []trainingv1alpha1.VolumeMount{{Name: "data", MountPath: path}},
				}
			}, "")
		})
	}
}

// TestCheckpointStorageClassName accepts what a claim's storageClassName
// accepts (a DNS subdomain, or empty for no class) and refuses the rest
// before the operator creates a claim the API server would refuse.
func TestCheckpointStorageClassName(t *testing.T) {
	c, ns := setup(t)
	for name, tc := range map[string]struct {
		class   string
		wantErr string
	}{
		"dns subdomain":   {class: "fast-ssd.example.com"},
		"empty: no class": {class: ""},
		"upper case":      {class: "Fast", wantErr: "checkpoint.storageClassName must be a StorageClass name"},
		"underscore":      {class: "fast_ssd", wantErr: "checkpoint.storageClassName must be a StorageClass name"},
		"trailing dash":   {class: "fast-", wantErr: "checkpoint.storageClassName must be a StorageClass name"},
	} {
		t.Run(name, func(t *testing.T) {
			tj := valid(ns, "class-"+strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), ":", ""))
			tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("1Gi")), StorageClassName: ptr.To(tc.class)}
			assertRefused(t, c.Create(t.Context(), tj), tc.wantErr)
		})
	}
}
