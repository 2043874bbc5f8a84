package patch

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// echoClient stands in for the API server: a patch is rendered (as the
// client would send it) and the object keeps what the reconcile computed,
// with a new resourceVersion. The benchmark thus measures what the helper
// costs the operator beyond the round trip.
type echoClient struct {
	client.Client
	scheme *runtime.Scheme
	sent   int
}

func (c *echoClient) Scheme() *runtime.Scheme          { return c.scheme }
func (c *echoClient) Status() client.SubResourceWriter { return echoWriter{c} }
func (c *echoClient) Patch(_ context.Context, obj client.Object, p client.Patch, _ ...client.PatchOption) error {
	return c.echo(obj, p)
}

func (c *echoClient) echo(obj client.Object, p client.Patch) error {
	data, err := p.Data(obj)
	if err != nil {
		return err
	}
	c.sent += len(data)
	rv, _ := strconv.Atoi(obj.GetResourceVersion())
	obj.SetResourceVersion(strconv.Itoa(rv + 1))
	return nil
}

type echoWriter struct{ c *echoClient }

func (w echoWriter) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return fmt.Errorf("not supported")
}
func (w echoWriter) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return fmt.Errorf("not supported")
}
func (w echoWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return fmt.Errorf("not supported")
}
func (w echoWriter) Patch(_ context.Context, obj client.Object, p client.Patch, _ ...client.SubResourcePatchOption) error {
	return w.c.echo(obj, p)
}

// runningJob is a running TrainingJob; with a user's spec (a command, args,
// ten environment variables, volumes, tolerations and an affinity) when
// wide is set, or the benchmark fixture's few fields otherwise.
func runningJob(wide bool) *trainingv1alpha1.TrainingJob {
	at := metav1.Unix(1_780_000_000, 0)
	tj := &trainingv1alpha1.TrainingJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainingv1alpha1.GroupVersion.String(), Kind: "TrainingJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "job00020", Namespace: "team-a", UID: "10fe3239-0e2c-44c2-8e4a-2ec9d74642db", ResourceVersion: "4554", Generation: 1},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch, Image: "registry.example.com/train:1", Workers: 4,
		},
		Status: trainingv1alpha1.TrainingJobStatus{
			ObservedGeneration: 1, Backend: trainingv1alpha1.BackendNative, Phase: trainingv1alpha1.PhaseRunning, Run: 1, StartTime: &at,
			Job: &trainingv1alpha1.JobReference{APIVersion: "batch/v1", Kind: "Job", Name: "job00020-r1"},
			Conditions: []metav1.Condition{
				{Type: "Finished", Status: metav1.ConditionFalse, Reason: "InProgress", Message: "The job has not finished", ObservedGeneration: 1, LastTransitionTime: at},
				{Type: "Created", Status: metav1.ConditionTrue, Reason: "JobCreated", Message: "Job job00020-r1 created", ObservedGeneration: 1, LastTransitionTime: at},
				{Type: "Suspended", Status: metav1.ConditionFalse, Reason: "NotSuspended", Message: "The job is not suspended", ObservedGeneration: 1, LastTransitionTime: at},
				{Type: "Running", Status: metav1.ConditionTrue, Reason: "Running", Message: "Job job00020-r1: all 4 pods are ready", ObservedGeneration: 1, LastTransitionTime: at},
			},
		},
	}
	if !wide {
		return tj
	}
	s := &tj.Spec
	s.Command = []string{"torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py"}
	s.Args = []string{"--epochs=90", "--batch-size=256", "--lr=0.1", "--data=/data/imagenet", "--checkpoint-dir=/ckpt"}
	for i := range 10 {
		s.Env = append(s.Env, corev1.EnvVar{Name: fmt.Sprintf("TRAIN_SETTING_%d", i), Value: fmt.Sprintf("value-of-setting-%d-for-this-experiment", i)})
	}
	s.Template = &trainingv1alpha1.PodTemplatePatch{
		Labels:      map[string]string{"team": "vision", "experiment": "resnet50-baseline"},
		Annotations: map[string]string{"mlplatform.dev/notes": "baseline run of the quarterly sweep"},
		Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "imagenet", ReadOnly: true}}},
			{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		VolumeMounts: []trainingv1alpha1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}, {Name: "cache", MountPath: "/cache"}},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		NodeSelector: map[string]string{"node.kubernetes.io/instance-type": "p4d.24xlarge"},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a", "eu-west-1b"}}}}},
		}}},
	}
	return tj
}

// finish is what a reconcile does to a running job that succeeded.
func finish(tj *trainingv1alpha1.TrainingJob) {
	at := metav1.Unix(1_780_000_600, 0)
	tj.Status.Phase = trainingv1alpha1.PhaseSucceeded
	tj.Status.CompletionTime = &at
	tj.Status.Duration = "10m0s"
	tj.Status.Roles = []trainingv1alpha1.RoleStatus{{Name: "Pods", Succeeded: 4}}
	for i := range tj.Status.Conditions {
		c := &tj.Status.Conditions[i]
		switch c.Type {
		case "Finished":
			c.Status, c.Reason, c.Message, c.LastTransitionTime = metav1.ConditionTrue, "Succeeded", "Reached expected number of succeeded pods", at
		case "Running":
			c.Status, c.Reason, c.Message, c.LastTransitionTime = metav1.ConditionFalse, "Finished", "The job finished", at
		}
	}
	tj.Status.Conditions = append(tj.Status.Conditions,
		metav1.Condition{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "Reached expected number of succeeded pods", ObservedGeneration: 1, LastTransitionTime: at})
}

// BenchmarkStatusPatch is one reconcile's status write of a job that
// succeeded: the helper's snapshot, the change, and the patch it sends.
//
//	go test -run '^$' -bench BenchmarkStatusPatch -benchmem ./shared/patch/
func BenchmarkStatusPatch(b *testing.B) {
	scheme := runtime.NewScheme()
	if err := trainingv1alpha1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	for _, wide := range []bool{false, true} {
		name := "fixture spec"
		if wide {
			name = "user spec"
		}
		b.Run(name, func(b *testing.B) {
			c := &echoClient{scheme: scheme}
			cached := runningJob(wide)
			b.ReportAllocs()
			for b.Loop() {
				tj := cached.DeepCopy()
				h, err := NewHelper(tj, c, nil)
				if err != nil {
					b.Fatal(err)
				}
				finish(tj)
				res, err := h.Patch(context.Background(), tj)
				if err != nil {
					b.Fatal(err)
				}
				if !res.StatusPatched || res.MetadataPatched {
					b.Fatalf("wrote %+v, want the status alone", res)
				}
			}
			b.ReportMetric(float64(c.sent)/float64(b.N), "patch-bytes/op")
		})
	}
}
