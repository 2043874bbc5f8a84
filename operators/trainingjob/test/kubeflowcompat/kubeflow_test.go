package kubeflowcompat

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/charttest"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	charts := filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator", "files")
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(charts, "crds"), filepath.Join(charts, "kubeflow-crds")},
	}, &env)
}

func TestKubeflowRunsTheGeneratedPyTorchJob(t *testing.T) {
	c, ns, kf := startStack(t)
	tj := &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mnist"},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch,
			Image:     "registry.example.com/mnist:1",
			Command:   []string{"python", "train.py"},
			Workers:   2,
			Template:  &trainingv1alpha1.PodTemplatePatch{Labels: map[string]string{"team": "vision"}},
		},
	}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}

	// Kubeflow creates one pod and one headless Service per replica.
	pods := &corev1.PodList{}
	poll(t, "the training-operator creates the pods (its log: "+kf.LogPath()+")", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubeflowv1.JobNameLabel: "mnist-r1"})
		return len(pods.Items) == 2, err
	})
	for _, p := range pods.Items {
		// The labels the operator's cache selects on reach the pods.
		if p.Labels["app.kubernetes.io/managed-by"] != harness.OperatorName || p.Labels[trainingv1alpha1.LabelJobName] != "mnist" || p.Labels["team"] != "vision" {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
		if !metav1.IsControlledBy(&p, &metav1.ObjectMeta{UID: jobUID(t, c, ns)}) {
			t.Errorf("pod %s is not controlled by the PyTorchJob", p.Name)
		}
		main := p.Spec.Containers[0]
		if main.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
			t.Errorf("pod %s terminationMessagePolicy %s", p.Name, main.TerminationMessagePolicy)
		}
		if !hasEnv(main.Env, "MASTER_ADDR") || !hasEnv(main.Env, "WORLD_SIZE") {
			t.Errorf("pod %s lacks the rendezvous environment Kubeflow sets: %v", p.Name, main.Env)
		}
		// The whole pod is restricted, the init container Kubeflow adds
		// to workers (waiting for the master's DNS name) included: the
		// chart replaces Kubeflow's built-in one.
		if err := podsecurity.CheckRestricted(&p.ObjectMeta, &p.Spec); err != nil {
			t.Errorf("pod %s: %v", p.Name, err)
		}
		if p.Labels[kubeflowv1.ReplicaTypeLabel] == "worker" {
			if ic := p.Spec.InitContainers; len(ic) != 1 || ic[0].Image != "ml-platform/busybox:1.35.0-4-deb12u1-b1" || !strings.Contains(strings.Join(ic[0].Command, " "), "nslookup mnist-r1-master-0") {
				t.Errorf("worker %s init containers %+v, want the chart's init-pytorch waiting for mnist-r1-master-0", p.Name, ic)
			}
		}
	}
	services := &corev1.ServiceList{}
	poll(t, "the training-operator creates the Services", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, services, client.InNamespace(ns), client.MatchingLabels{kubeflowv1.JobNameLabel: "mnist-r1"})
		return len(services.Items) == 2, err
	})

	// Kubeflow's status reaches the TrainingJob.
	poll(t, "the TrainingJob is Created from Kubeflow's status", func(ctx context.Context) (bool, error) {
		got := &trainingv1alpha1.TrainingJob{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, err
		}
		// Kubeflow's all-zero replica counts (no pod runs without a
		// kubelet) are not recorded: they would cost a write saying nothing.
		return conditions.IsTrue(got, trainingv1alpha1.ConditionCreated) && got.Status.Job != nil && got.Status.Job.Kind == kubeflowv1.PyTorchJobKind && len(got.Status.Roles) == 0, nil
	})
}

func jobUID(t *testing.T, c client.Client, ns string) types.UID {
	t.Helper()
	job := &kubeflowv1.PyTorchJob{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "mnist-r1"}, job); err != nil {
		t.Fatal(err)
	}
	return job.UID
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// chartInitContainerArgs returns the training-operator flags the chart sets
// for the PyTorch init container, with its template file, rendered from the
// chart's ConfigMap, written where this process can read it.
func chartInitContainerArgs(t *testing.T) []string {
	t.Helper()
	manifest, err := charttest.Render(filepath.Join(testenv.RepoRoot(), "charts", "trainingjob-operator"), "tj", "mlp-system", map[string]any{"kubeflow": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	var template string
	for _, doc := range charttest.Documents(manifest) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.Object == nil {
			continue
		}
		switch {
		case u.GetKind() == "ConfigMap" && strings.HasSuffix(u.GetName(), "-pytorch-init-container"):
			template, _, _ = unstructured.NestedString(u.Object, "data", "pytorch-init-container.yaml")
		case u.GetKind() == "Deployment" && strings.HasSuffix(u.GetName(), "-kubeflow"):
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			container, _ := containers[0].(map[string]any)
			flags, _, _ := unstructured.NestedStringSlice(container, "args")
			for _, f := range flags {
				if strings.HasPrefix(f, "--pytorch-init-container-") && !strings.HasPrefix(f, "--pytorch-init-container-template-file=") || strings.HasPrefix(f, "--mpi-kubectl-delivery-image=") {
					args = append(args, f)
				}
			}
		}
	}
	if template == "" || len(args) != 3 {
		t.Fatalf("the chart renders no init container template (%d bytes) or not its image, max-tries and MPI kubectl-delivery flags (%v)", len(template), args)
	}
	path := filepath.Join(t.TempDir(), "pytorch-init-container.yaml")
	if err := os.WriteFile(path, []byte(template), 0o600); err != nil {
		t.Fatal(err)
	}
	return append(args, "--pytorch-init-container-template-file="+path)
}
