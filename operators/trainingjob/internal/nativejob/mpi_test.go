package nativejob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/mpi"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
)

// TestBuildMPIIsALauncherAndSSHServersInOneIndexedJob pins the native MPI
// shape: index 0 is the launcher with a hostfile of every other index, the
// Job succeeds on the launcher's success alone, every pod gets the keys of
// the TrainingJob's Secret, and the pods pass the restricted Pod Security
// Standard (sshd runs as the pods' user on an unprivileged port).
func TestBuildMPIIsALauncherAndSSHServersInOneIndexedJob(t *testing.T) {
	tj := newTJ(trainingv1alpha1.FrameworkMPI, 3)
	tj.Spec.Command = []string{"mpirun", "python3", "/opt/ml-platform/allreduce.py"}
	tj.Spec.MPI = &trainingv1alpha1.MPISpec{SlotsPerWorker: ptr.To[int32](2)}
	obj, err := NewBackend(settings).Build(tj, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := obj.(*batchv1.Job)
	if *job.Spec.Completions != 3 || *job.Spec.Parallelism != 3 || *job.Spec.BackoffLimit != 0 {
		t.Errorf("completions %d parallelism %d backoffLimit %d, want 3 3 0", *job.Spec.Completions, *job.Spec.Parallelism, *job.Spec.BackoffLimit)
	}
	wantPolicy := &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
	if diff := cmp.Diff(wantPolicy, job.Spec.SuccessPolicy); diff != "" {
		t.Errorf("success policy (-want +got):\n%s", diff)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if c.Name != "mpi" || c.Ports[0].ContainerPort != mpi.Port {
		t.Errorf("container %s ports %v", c.Name, c.Ports)
	}
	if diff := cmp.Diff(tj.Spec.Command, c.Args); diff != "" {
		t.Errorf("the launcher's command (-want +got):\n%s", diff)
	}
	env := expand(c.Env, 0)
	wantHosts := "localhost slots=2\nmnist-r2-1.trainingjob-ranks.team-a.svc slots=2\nmnist-r2-2.trainingjob-ranks.team-a.svc slots=2\n"
	if diff := cmp.Diff(wantHosts, env[mpi.EnvHostfile]); diff != "" {
		t.Errorf("hostfile (-want +got):\n%s", diff)
	}
	if env[EnvCompletionIndex] != "0" || env[mpi.EnvRole] != "" {
		t.Errorf("index %q role %q: the launcher must be chosen by index", env[EnvCompletionIndex], env[mpi.EnvRole])
	}
	secret := ""
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	if secret != "mnist-mpi-ssh" {
		t.Errorf("key Secret %q, want mnist-mpi-ssh", secret)
	}
	if err := podsecurity.CheckRestricted(&job.Spec.Template.ObjectMeta, &job.Spec.Template.Spec); err != nil {
		t.Errorf("MPI pods break the restricted Pod Security Standard: %v", err)
	}
}

// TestBuildOtherFrameworksHaveNoSuccessPolicy keeps the success policy to
// MPI: for the others every rank must succeed.
func TestBuildOtherFrameworksHaveNoSuccessPolicy(t *testing.T) {
	obj, err := NewBackend(settings).Build(newTJ(trainingv1alpha1.FrameworkPyTorch, 2), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := obj.(*batchv1.Job).Spec.SuccessPolicy; p != nil {
		t.Errorf("pytorch job has success policy %+v", p)
	}
}
