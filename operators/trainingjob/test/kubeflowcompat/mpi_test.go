package kubeflowcompat

import (
	"context"
	"fmt"
	"strings"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
)

// TestKubeflowRunsTheGeneratedMPIJob hands the generated MPIJob to the real
// training-operator v1.8.1 and checks what it makes of it: a launcher and
// workers, each worker selected by a headless Service of its pod's name
// and no other pod (training-operator v1 gives MPI pods no hostname, so a
// subdomain would name none), whose names are exactly the launcher's
// hostfile; the workers run the SSH
// server with the TrainingJob's keys and pass the restricted Pod Security
// Standard. The launcher cannot: the training-operator adds its
// kubectl-delivery init container without any securityContext, which is
// where Restricted does not hold for MPI on this backend.
func TestKubeflowRunsTheGeneratedMPIJob(t *testing.T) {
	c, ns, kf := startStack(t)
	tj := &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allreduce"},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkMPI,
			Image:     "localhost/ml-platform/mpi:4.1",
			Command:   []string{"mpirun", "python3", "/opt/ml-platform/allreduce.py"},
			Workers:   3,
			MPI:       &trainingv1alpha1.MPISpec{SlotsPerWorker: ptr.To[int32](2)},
		},
	}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	poll(t, "the MPI SSH Secret", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "allreduce-mpi-ssh"}, secret)
		return err == nil, client.IgnoreNotFound(err)
	})

	pods := &corev1.PodList{}
	poll(t, "the training-operator creates the launcher and two workers (its log: "+kf.LogPath()+")", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubeflowv1.JobNameLabel: "allreduce-r1"})
		return len(pods.Items) == 3, err
	})
	services := &corev1.ServiceList{}
	poll(t, "the workers' headless Services", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, services, client.InNamespace(ns))
		return len(services.Items) == 2, err
	})
	// selects names the pods a Service's DNS name leads to.
	selects := func(svc *corev1.Service) []string {
		var names []string
		for _, p := range pods.Items {
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
				names = append(names, p.Name)
			}
		}
		return names
	}

	var launcher *corev1.Pod
	var workers []string
	for i := range pods.Items {
		p := &pods.Items[i]
		mounted := false
		for _, v := range p.Spec.Volumes {
			mounted = mounted || v.Secret != nil && v.Secret.SecretName == secret.Name
		}
		if !mounted {
			t.Errorf("pod %s does not mount the key Secret", p.Name)
		}
		if p.Labels[kubeflowv1.ReplicaTypeLabel] == "launcher" {
			launcher = p
			continue
		}
		var named []string
		for j := range services.Items {
			svc := &services.Items[j]
			if svc.Name == p.Name && svc.Spec.ClusterIP == corev1.ClusterIPNone {
				named = selects(svc)
			}
		}
		if len(named) != 1 || named[0] != p.Name {
			t.Errorf("the headless Service %s leads to pods %v, want worker %s alone", p.Name, named, p.Name)
		}
		workers = append(workers, fmt.Sprintf("%s.%s.svc slots=2\n", p.Name, ns))
		if env := envOf(p.Spec.Containers[0]); env["MLPLATFORM_MPI_ROLE"] != "worker" {
			t.Errorf("worker %s role %q", p.Name, env["MLPLATFORM_MPI_ROLE"])
		}
		if err := podsecurity.CheckRestricted(&p.ObjectMeta, &p.Spec); err != nil {
			t.Errorf("worker %s: %v", p.Name, err)
		}
	}
	if launcher == nil {
		t.Fatalf("no launcher among %d pods", len(pods.Items))
	}
	env := envOf(launcher.Spec.Containers[0])
	hostfile := env["MLPLATFORM_MPI_HOSTFILE"]
	if env["MLPLATFORM_MPI_ROLE"] != "launcher" || !strings.HasPrefix(hostfile, "localhost slots=2\n") || len(workers) != 2 {
		t.Fatalf("launcher role %q hostfile %q, workers %v", env["MLPLATFORM_MPI_ROLE"], hostfile, workers)
	}
	for _, w := range workers {
		if !strings.Contains(hostfile, w) {
			t.Errorf("the launcher's hostfile %q lacks the worker the training-operator named %q", hostfile, w)
		}
	}
	// The launcher passes the user's command to the entrypoint unchanged.
	if got := strings.Join(launcher.Spec.Containers[0].Args, " "); got != "mpirun python3 /opt/ml-platform/allreduce.py" {
		t.Errorf("launcher args %q", got)
	}
	err := podsecurity.CheckRestricted(&launcher.ObjectMeta, &launcher.Spec)
	if err == nil || len(launcher.Spec.InitContainers) != 1 || launcher.Spec.InitContainers[0].Name != "kubectl-delivery" {
		t.Errorf("launcher init containers %v, restricted check %v: want Kubeflow's kubectl-delivery, which breaks Restricted", launcher.Spec.InitContainers, err)
	}

	poll(t, "the TrainingJob is Created from Kubeflow's status", func(ctx context.Context) (bool, error) {
		got := &trainingv1alpha1.TrainingJob{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return false, err
		}
		return conditions.IsTrue(got, trainingv1alpha1.ConditionCreated) && got.Status.Job != nil && got.Status.Job.Kind == kubeflowv1.MPIJobKind, nil
	})
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}
