package kueuecompat

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	tjcontroller "github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// waitPyTorchJob polls until the run's PyTorchJob exists and check
// accepts it.
func (s *stack) waitPyTorchJob(t *testing.T, name, what string, check func(*kubeflowv1.PyTorchJob) bool) *kubeflowv1.PyTorchJob {
	t.Helper()
	job := &kubeflowv1.PyTorchJob{}
	testenv.Eventually(t, "PyTorchJob "+name+": "+what, func(ctx context.Context) (bool, error) {
		err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, job)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && check(job), err
	})
	return job
}

func pytorchSuspended(j *kubeflowv1.PyTorchJob) bool {
	return ptr.Deref(j.Spec.RunPolicy.Suspend, false)
}

// pytorchFlavored is true when Kueue's admission reached every replica's
// pod template: the flavor's node label and toleration.
func pytorchFlavored(j *kubeflowv1.PyTorchJob) bool {
	for _, r := range j.Spec.PyTorchReplicaSpecs {
		spec := r.Template.Spec
		if spec.NodeSelector[flavorLabel] == "" || !slices.Contains(spec.Tolerations, flavorToleration) {
			return false
		}
	}
	return len(j.Spec.PyTorchReplicaSpecs) > 0
}

// TestKueueAdmitsTheKubeflowBackend: with Kueue's kubeflow.org/pytorchjob
// integration on, a TrainingJob on the kubeflow backend is queued through
// its PyTorchJob as a native one is through its Job: within quota Kueue
// admits it (unsuspends it and injects its flavor into every replica),
// beyond quota it waits Queued with Kueue's reason, its PyTorchJob
// suspended, and it is admitted once quota frees. The operator writes each
// PyTorchJob once, when it creates it.
func TestKueueAdmitsTheKubeflowBackend(t *testing.T) {
	s := startStackWith(t, stackOptions{kubeflow: true})
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "2"})

	fits := s.trainingJob("kf-fits", "team-queue", 2, 1)
	fits.Spec.Backend = trainingv1alpha1.BackendKubeflow
	s.create(t, fits)
	job := s.waitPyTorchJob(t, "kf-fits-r1", "admitted", func(j *kubeflowv1.PyTorchJob) bool { return !pytorchSuspended(j) })
	if !pytorchFlavored(job) {
		t.Errorf("Kueue's flavor is not in every replica of the admitted PyTorchJob: %+v", job.Spec.PyTorchReplicaSpecs)
	}
	wl := s.waitKubeflowWorkload(t, job, "Admitted", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "Admitted") == "True" })
	if n := len(podSets(wl)); n != len(job.Spec.PyTorchReplicaSpecs) {
		t.Errorf("the Workload has %d pod sets for %d replica types", n, len(job.Spec.PyTorchReplicaSpecs))
	}
	got := s.waitTJ(t, fits, "Admitted", admitted)
	if got.Status.Job == nil || got.Status.Job.Kind != kubeflowv1.PyTorchJobKind {
		t.Errorf("status.job %+v, want the PyTorchJob", got.Status.Job)
	}

	big := s.trainingJob("kf-big", "team-queue", 1, 2)
	big.Spec.Backend = trainingv1alpha1.BackendKubeflow
	s.create(t, big)
	bigJob := s.waitPyTorchJob(t, "kf-big-r1", "created suspended", pytorchSuspended)
	bigWL := s.waitKubeflowWorkload(t, bigJob, "QuotaReserved=False", func(wl *unstructured.Unstructured) bool {
		status, _, msg := condition(wl, "QuotaReserved")
		return status == "False" && msg != ""
	})
	_, _, kueueMsg := condition(bigWL, "QuotaReserved")
	got = s.waitTJ(t, big, "Queued with Kueue's reason", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return queued(tj, tjcontroller.ReasonWaiting) && strings.Contains(c.Message, kueueMsg)
	})
	t.Logf("kubeflow backend, Queued condition: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	testenv.Consistently(t, "the queued PyTorchJob stays suspended", 3*time.Second, func(ctx context.Context) error {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(bigJob), bigJob); err != nil {
			return err
		}
		if !pytorchSuspended(bigJob) {
			return errUnsuspended
		}
		return nil
	})

	if err := s.c.Delete(t.Context(), fits); err != nil {
		t.Fatal(err)
	}
	s.waitGone(t, job)
	s.waitPyTorchJob(t, "kf-big-r1", "admitted once quota frees", func(j *kubeflowv1.PyTorchJob) bool { return !pytorchSuspended(j) && pytorchFlavored(j) })
	s.waitTJ(t, big, "Admitted", admitted)
	counts := s.writesOn(t, "pytorchjobs", bigJob.Namespace, bigJob.Name)
	t.Logf("writes on PyTorchJob %s through queueing and admission: %v", bigJob.Name, counts)
	if counts[operatorUser] != 1 || counts[kueueUser] == 0 {
		t.Errorf("writes on the PyTorchJob: %v, want the operator's create only and Kueue's admission", counts)
	}
}

var errUnsuspended = errors.New("a PyTorchJob was unsuspended while its Workload waited")

// waitKubeflowWorkload polls until the Workload Kueue made for a
// PyTorchJob exists and check accepts it.
func (s *stack) waitKubeflowWorkload(t *testing.T, job *kubeflowv1.PyTorchJob, what string, check func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var wl *unstructured.Unstructured
	testenv.Eventually(t, "Workload of "+job.Name+": "+what, func(ctx context.Context) (bool, error) {
		items, err := kueue.WorkloadsOf(ctx, s.c, s.ns, job.UID)
		if err != nil || len(items) == 0 {
			return false, err
		}
		wl = &items[0]
		return check(wl), nil
	})
	return wl
}

func podSets(wl *unstructured.Unstructured) []any {
	sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	return sets
}

// TestKueueWithoutTheKubeflowIntegrationStallsTheJob: with the Kubeflow
// CRDs served but Kueue's kubeflow.org/pytorchjob integration off, Kueue
// makes no Workload for the suspended PyTorchJob and nothing would ever
// admit it. Past the grace the TrainingJob is Stalled (still Queued), with
// a Warning event, in words that name the integration Kueue needs; the
// PyTorchJob stays suspended, since starting it would bypass the quota.
func TestKueueWithoutTheKubeflowIntegrationStallsTheJob(t *testing.T) {
	s := startStackWith(t, stackOptions{kubeflowWithoutIntegration: true, operator: harness.Options{WorkloadGrace: 3 * time.Second}})
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "2"})

	tj := s.trainingJob("kf-unmanaged", "team-queue", 1, 0)
	tj.Spec.Backend = trainingv1alpha1.BackendKubeflow
	s.create(t, tj)
	got := s.waitTJ(t, tj, "Stalled naming Kueue's integration", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, commonv1alpha1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == tjcontroller.ReasonNoWorkload &&
			strings.Contains(c.Message, `"`+kueuePyTorchJobFramework+`"`) && queued(tj, tjcontroller.ReasonWaiting)
	})
	t.Logf("Stalled: %s", conditions.Get(got, commonv1alpha1.ConditionStalled).Message)
	testenv.Eventually(t, "a Warning event NoWorkload on "+tj.Name, func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := s.c.List(ctx, events, client.InNamespace(s.ns)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == tj.Name && e.Type == corev1.EventTypeWarning && e.Reason == tjcontroller.ReasonNoWorkload {
				return true, nil
			}
		}
		return false, nil
	})
	job := s.waitPyTorchJob(t, "kf-unmanaged-r1", "created suspended", pytorchSuspended)
	if items, err := kueue.WorkloadsOf(t.Context(), s.c, s.ns, job.UID); err != nil || len(items) != 0 {
		t.Fatalf("Kueue made %d Workloads (err %v) for a kind it does not manage; the test's premise is wrong", len(items), err)
	}
}
