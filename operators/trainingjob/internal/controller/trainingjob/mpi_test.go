package trainingjob

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/mpi"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// mpiTrainingJob is a native MPI job: an mpi4py allreduce over workers
// pods with two slots each.
func mpiTrainingJob(ns, name string, workers int32) *trainingv1alpha1.TrainingJob {
	tj := native(newTrainingJob(ns, name, workers))
	tj.Spec.Framework = trainingv1alpha1.FrameworkMPI
	tj.Spec.Command = []string{"mpirun", "python3", "/opt/ml-platform/allreduce.py"}
	tj.Spec.MPI = &trainingv1alpha1.MPISpec{SlotsPerWorker: ptr.To[int32](2)}
	return tj
}

// waitMPISecret waits for the SSH Secret of tj whose UID is not old.
func waitMPISecret(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob, old string) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{}
	testenv.Eventually(t, "the MPI SSH Secret", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: mpi.SecretName(tj.Name)}, secret)
		return err == nil && string(secret.UID) != old, client.IgnoreNotFound(err)
	})
	return secret
}

// keyFragments are pieces of the private key that any leak of it, encoded
// or not, would show: its base64 body lines and the base64 of the whole.
func keyFragments(secret *corev1.Secret) []string {
	priv := secret.Data[mpi.KeyPrivate]
	var out []string
	for _, line := range strings.Split(string(priv), "\n") {
		if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
			out = append(out, line[:32])
		}
	}
	return append(out, base64.StdEncoding.EncodeToString(priv)[:48])
}

// TestNativeMPIRunsALauncherOverSSHWithKeysItOwns runs a native MPI job
// through its life on the real API server: the operator generates a key
// pair into a Secret the TrainingJob controls before it creates the run's
// Indexed Job, whose pods mount it, whose index 0 launches the user's
// command over a hostfile of the other pods' stable names, and which
// succeeds on the launcher's success alone; a deleted Secret is generated
// again (another key) while the run goes on; the key never reaches the
// TrainingJob's status nor any event (the package's log scan covers the
// logs).
func TestNativeMPIRunsALauncherOverSSHWithKeysItOwns(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := mpiTrainingJob(ns, "allreduce", 3)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	job := waitBatchJob(t, c, ns, "allreduce-r1")
	secret := waitMPISecret(t, c, tj, "")
	if !metav1.IsControlledBy(secret, tj) || !metav1.IsControlledBy(job, tj) {
		t.Errorf("Secret owners %v, Job owners %v: want both controlled by the TrainingJob", secret.OwnerReferences, job.OwnerReferences)
	}
	if secret.Labels[commonv1alpha1.LabelManagedBy] != operatorName || secret.Labels[trainingv1alpha1.LabelJobName] != tj.Name {
		t.Errorf("Secret labels %v: want the operator's, for its cache and watch", secret.Labels)
	}
	signer, err := ssh.ParsePrivateKey(secret.Data[mpi.KeyPrivate])
	if err != nil {
		t.Fatalf("the Secret's private key: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(secret.Data[mpi.KeyPublic])
	if err != nil || !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) {
		t.Errorf("the Secret's public key does not match its private key (%v)", err)
	}

	spec := job.Spec
	if diff := cmp.Diff(&batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}, spec.SuccessPolicy); diff != "" {
		t.Errorf("success policy (-want +got):\n%s", diff)
	}
	pod := spec.Template.Spec
	c0 := pod.Containers[0]
	if diff := cmp.Diff(tj.Spec.Command, c0.Args); diff != "" {
		t.Errorf("the launcher's command (-want +got):\n%s", diff)
	}
	env := map[string]string{}
	for _, e := range c0.Env {
		env[e.Name] = e.Value
	}
	wantHosts := "localhost slots=2\n" +
		"allreduce-r1-1." + rankdns.Service + "." + ns + ".svc slots=2\n" +
		"allreduce-r1-2." + rankdns.Service + "." + ns + ".svc slots=2\n"
	if diff := cmp.Diff(wantHosts, env[mpi.EnvHostfile]); diff != "" {
		t.Errorf("hostfile (-want +got):\n%s", diff)
	}
	mounted := false
	for _, v := range pod.Volumes {
		mounted = mounted || v.Secret != nil && v.Secret.SecretName == secret.Name
	}
	if !mounted || pod.Subdomain != rankdns.Service {
		t.Errorf("pods mount the Secret %t, subdomain %q", mounted, pod.Subdomain)
	}
	if err := podsecurity.CheckRestricted(&spec.Template.ObjectMeta, &pod); err != nil {
		t.Errorf("MPI pods break the restricted Pod Security Standard: %v", err)
	}

	// Deleted while the run goes on, the Secret comes back with another
	// key, and the run's Job stays.
	leaked := keyFragments(secret)
	if err := c.Delete(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	again := waitMPISecret(t, c, tj, string(secret.UID))
	if bytes.Equal(again.Data[mpi.KeyPrivate], secret.Data[mpi.KeyPrivate]) || !metav1.IsControlledBy(again, tj) {
		t.Errorf("the regenerated Secret holds the old key or is not the TrainingJob's (owners %v)", again.OwnerReferences)
	}
	leaked = append(leaked, keyFragments(again)...)

	// The Job controller's part: every rank runs, then the launcher
	// (index 0) succeeds and the success policy ends the run while the
	// SSH servers still run.
	pods := runRanks(t, c, job)
	waitTJ(t, c, tj, "Running", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, trainingv1alpha1.ConditionRunning) == metav1.ConditionTrue
	})
	end := metav1.NewTime(time.Now().Truncate(time.Second))
	setPodStatus(t, c, pods[0], func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: end}}
	})
	setBatchStatus(t, c, job, func(s *batchv1.JobStatus) {
		s.Active, s.Ready, s.Succeeded, s.CompletedIndexes = 2, ptr.To[int32](2), 1, "0"
		batchCond(s, batchv1.JobSuccessCriteriaMet, "SuccessPolicy", "Matched rules at index 0", end)
	})
	got := waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionSucceeded) == metav1.ConditionTrue
	})
	if got.Status.Job == nil || got.Status.Job.Kind != "Job" || got.Status.Backend != trainingv1alpha1.BackendNative {
		t.Errorf("status job %+v backend %q", got.Status.Job, got.Status.Backend)
	}
	testenv.WaitForEvent(t, c, tj, "Succeeded")

	status, err := json.Marshal(got.Status)
	if err != nil {
		t.Fatal(err)
	}
	events := &corev1.EventList{}
	if err := c.List(t.Context(), events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	texts := []string{string(status)}
	for _, e := range events.Items {
		texts = append(texts, e.Message, e.Reason)
	}
	for _, text := range texts {
		for _, frag := range leaked {
			if strings.Contains(text, frag) {
				t.Errorf("the private key appears in the TrainingJob's status or an event: %q", text)
			}
		}
	}
}

// TestNativeMPIRefusesASecretThatIsNotItsOwn: a Secret of the key's name
// that the TrainingJob does not control is left alone, and the job stalls
// with a message that names it, without a run.
func TestNativeMPIRefusesASecretThatIsNotItsOwn(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mpi.SecretName("taken")},
		StringData: map[string]string{"note": "somebody else's"},
	}
	if err := c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	tj := mpiTrainingJob(ns, "taken", 2)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	stalled := conditionOf(got, commonv1alpha1.ConditionStalled)
	if stalled.Reason != commonv1alpha1.ReasonNameTaken || !strings.Contains(stalled.Message, "Secret "+ns+"/taken-mpi-ssh exists and does not belong to this TrainingJob") {
		t.Errorf("Stalled %s: %q", stalled.Reason, stalled.Message)
	}
	testenv.Consistently(t, "no Job for "+tj.Name, 3*time.Second, func(ctx context.Context) error {
		jobs := &batchv1.JobList{}
		if err := c.List(ctx, jobs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(jobs.Items) != 0 {
			return fmt.Errorf("%d Jobs created behind a foreign Secret", len(jobs.Items))
		}
		return nil
	})
	live := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(foreign), live); err != nil || len(live.OwnerReferences) != 0 || string(live.Data["note"]) != "somebody else's" {
		t.Errorf("the foreign Secret was changed: %v %v", err, live)
	}
}

func conditionOf(tj *trainingv1alpha1.TrainingJob, typ string) metav1.Condition {
	for _, c := range tj.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// TestKubeflowMPIWorkerServiceNameTakenIsReported: on the Kubeflow
// backend each MPI worker gets a headless Service named as its pod, which
// gives it the host name the launcher's hostfile lists. A Service of that
// name that is not the run's is never used or touched: with a selector of
// its own, cluster DNS would give its pods the worker's host name. The
// job's events say so, since the run's status stays its child's.
func TestKubeflowMPIWorkerServiceNameTakenIsReported(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	foreign := createImpostorService(t, c, ns, "taken-r1-worker-0")
	tj := mpiTrainingJob(ns, "taken", 2)
	tj.Spec.Backend = trainingv1alpha1.BackendKubeflow
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	ev := testenv.WaitForEvent(t, c, tj, ReasonCompanionNameTaken)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "Service "+ns+"/taken-r1-worker-0 exists and does not belong to run 1 of this TrainingJob") {
		t.Errorf("event %s %q", ev.Type, ev.Message)
	}
	checkUntouched(t, c, foreign)
}
