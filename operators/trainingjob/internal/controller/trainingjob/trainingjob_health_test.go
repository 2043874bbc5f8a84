package trainingjob

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/health"
	"github.com/ml-platform/ml-platform/shared/health/healthtest"
)

// TestHealthOfEveryState runs setStatus, the operator's own status
// computation, for every state a TrainingJob can be in, and checks what
// kstatus (Helm 4 --wait, Flux) and the shipped Argo CD health check make
// of the result; the table of what each tool and kubectl get say is kept
// in testdata/health-table.md (go test -v prints it).
//
// A running job is Current for kstatus: it is where the operator wants
// it, and a Helm --wait or a Flux health check must not wait for the
// length of a training. Argo CD shows it Progressing, as it shows a
// running batch Job. To wait for the end, kubectl wait
// --for=condition=Finished (TestFinishedEndsBothWays).
func TestHealthOfEveryState(t *testing.T) {
	restartEnd := &runEnd{restart: true, next: 2, record: trainingv1alpha1.RunRecord{Run: 1, Reason: "Preempted", Class: trainingv1alpha1.FailureClassInfrastructure}, message: "run 2 follows"}
	table := healthtest.NewTable(t, filepath.Join(chartDir(), "files", "crds", "training.mlplatform.dev_trainingjobs.yaml"))
	for _, tc := range []struct {
		state         string
		suspend       bool
		queue         string
		o             observation
		specChangedBy int64
		kstatus       status.Status
		argo          string
	}{
		{state: "creating its job", o: observation{}, kstatus: status.InProgressStatus, argo: health.Progressing},
		{state: "queued", queue: "q", o: observation{job: specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended)), queue: &queueObservation{position: ptr.To[int32](2)}}, kstatus: status.InProgressStatus, argo: health.Suspended},
		{state: "pods pending", o: observation{job: kfStatus(kubeflowv1.JobCreated)}, kstatus: status.InProgressStatus, argo: health.Progressing},
		{state: "running", o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning)}, kstatus: status.CurrentStatus, argo: health.Progressing},
		{state: "pods restarting", o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRestarting)}, kstatus: status.InProgressStatus, argo: health.Progressing},
		{state: "restarting (next run)", o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobFailed), end: restartEnd}, kstatus: status.InProgressStatus, argo: health.Progressing},
		{state: "suspended", suspend: true, o: observation{job: specSuspended(kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobSuspended))}, kstatus: status.CurrentStatus, argo: health.Suspended},
		{state: "succeeded", o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning, kubeflowv1.JobSucceeded)}, kstatus: status.CurrentStatus, argo: health.Healthy},
		{state: "failed", o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning, kubeflowv1.JobFailed)}, kstatus: status.FailedStatus, argo: health.Degraded},
		{state: "invalid spec", o: observation{invalid: errors.New("bad"), invalidReason: "InvalidSpec"}, kstatus: status.FailedStatus, argo: health.Degraded},
		{state: "running, spec changed not yet observed", o: observation{job: kfStatus(kubeflowv1.JobCreated, kubeflowv1.JobRunning)}, specChangedBy: 1, kstatus: status.InProgressStatus, argo: health.Progressing},
	} {
		t.Run(tc.state, func(t *testing.T) {
			tj := &trainingv1alpha1.TrainingJob{
				TypeMeta:   metav1.TypeMeta{APIVersion: trainingv1alpha1.GroupVersion.String(), Kind: "TrainingJob"},
				ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team-a", Generation: 2, CreationTimestamp: metav1.NewTime(t0)},
			}
			tj.Spec.Framework, tj.Spec.Workers = trainingv1alpha1.FrameworkPyTorch, 2
			tj.Spec.Suspend, tj.Spec.QueueName = tc.suspend, tc.queue
			tc.o.kind, tc.o.jobName, tc.o.run, tc.o.backend, tc.o.now = "PyTorchJob", "mnist-r1", 1, "kubeflow", t0.Add(time.Hour)
			if tc.o.job != nil {
				tc.o.localQueue = tc.queue
			}
			setStatus(tj, tc.o)
			tj.Status.ObservedGeneration = tj.Generation // as the Runner stamps it
			tj.Generation += tc.specChangedBy
			healthtest.Expect(t, tj, tc.kstatus, tc.argo)
			table.Add(t, tc.state, tj)
		})
	}
	table.Golden(t, filepath.Join("testdata", "health-table.md"))
}
