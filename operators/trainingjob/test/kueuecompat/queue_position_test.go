package kueuecompat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	tjcontroller "github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// positionRefresh is how often queued jobs read their position in these
// tests: short, so that a change of the queue shows within seconds.
const positionRefresh = 2 * time.Second

func position(tj *trainingv1alpha1.TrainingJob) int32 {
	if tj.Status.Queue == nil {
		return 0
	}
	return ptr.Deref(tj.Status.Queue.Position, 0)
}

// waitPosition waits until the TrainingJob waits at pos in team-queue,
// in status and in its Queued condition's message.
func (s *stack) waitPosition(t *testing.T, tj *trainingv1alpha1.TrainingJob, pos int32) *trainingv1alpha1.TrainingJob {
	t.Helper()
	want := fmt.Sprintf("position %d in LocalQueue team-queue", pos)
	return s.waitTJ(t, tj, want, func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return queued(tj, tjcontroller.ReasonWaiting) && position(tj) == pos && tj.Status.Queue.LocalQueue == "team-queue" && strings.Contains(c.Message, want)
	})
}

// TestQueuePositionFromKueuesVisibilityAPI: jobs waiting beyond quota show
// their place in the LocalQueue as Kueue's visibility API (served by the
// real Kueue behind the API server's aggregator) reports it, in status, in
// the Queued condition and in the printer column; places move up as the
// queue drains, and an admitted job has none.
func TestQueuePositionFromKueuesVisibilityAPI(t *testing.T) {
	s := startStackWith(t, stackOptions{visibility: true, operator: harness.Options{QueuePositionRefresh: positionRefresh}})
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})
	top, mid := s.ns+"-top", s.ns+"-mid"
	s.createPriorityClass(t, top, 1000)
	s.createPriorityClass(t, mid, 100)

	// The holder takes the only GPU. Of the two that wait, the one with
	// the higher priority comes first whatever the order of creation,
	// and neither may preempt the holder.
	holder := s.trainingJob("holder", "team-queue", 1, 1)
	holder.Labels = map[string]string{trainingv1alpha1.LabelKueuePriorityClass: top}
	s.create(t, holder)
	s.waitTJ(t, holder, "Admitted", admitted)
	second := s.trainingJob("second", "team-queue", 1, 1)
	s.create(t, second)
	first := s.trainingJob("first", "team-queue", 1, 1)
	first.Labels = map[string]string{trainingv1alpha1.LabelKueuePriorityClass: mid}
	s.create(t, first)

	s.waitPosition(t, first, 1)
	got := s.waitPosition(t, second, 2)
	t.Logf("Queued condition: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	s.logVisibilityCall(t)
	if col := s.printerColumn(t, second, "Position"); col != float64(2) {
		t.Errorf("printer column Position of %s: %v, want 2", second.Name, col)
	}

	// The holder ends: the first job is admitted and the second moves up.
	if err := s.c.Delete(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	got = s.waitTJ(t, first, "Admitted", admitted)
	if got.Status.Queue != nil {
		t.Errorf("an admitted job keeps a place in the queue: %+v", got.Status.Queue)
	}
	s.waitPosition(t, second, 1)
}

// logVisibilityCall logs what one read of the LocalQueue's pending
// workloads costs through the aggregator: the operator's refresh makes
// this call once per LocalQueue per refresh, whatever its number of jobs.
func (s *stack) logVisibilityCall(t *testing.T) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b, err := cs.RESTClient().Get().AbsPath("/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces", s.ns, "localqueues", "team-queue", "pendingworkloads").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one pendingworkloads call for 2 waiting jobs: %s, %d bytes", time.Since(start), len(b))
}

// printerColumn reads one cell of the TrainingJob's row as kubectl get
// prints it: the API server's Table rendering of the CRD's columns.
func (s *stack) printerColumn(t *testing.T, tj *trainingv1alpha1.TrainingJob, column string) any {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cs.RESTClient().Get().AbsPath("/apis/training.mlplatform.dev/v1alpha1/namespaces", tj.Namespace, "trainingjobs", tj.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	for i, c := range table.ColumnDefinitions {
		if c.Name == column && len(table.Rows) == 1 {
			return table.Rows[0].Cells[i]
		}
	}
	t.Fatalf("no column %s in %s", column, b)
	return nil
}

// TestQueuePositionWithoutVisibilityAPI: with Kueue's visibility API not
// served, a queued job says why it has no position, once: its periodic
// refreshes write nothing more.
func TestQueuePositionWithoutVisibilityAPI(t *testing.T) {
	s := startStackWith(t, stackOptions{operator: harness.Options{QueuePositionRefresh: positionRefresh}})
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})

	tj := s.trainingJob("too-big", "team-queue", 1, 2)
	s.create(t, tj)
	got := s.waitTJ(t, tj, "Queued, position unknown", func(tj *trainingv1alpha1.TrainingJob) bool {
		c := conditions.Get(tj, trainingv1alpha1.ConditionQueued)
		return queued(tj, tjcontroller.ReasonWaiting) && strings.Contains(c.Message, "position unknown: Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2) is not served")
	})
	t.Logf("Queued condition: %s", conditions.Get(got, trainingv1alpha1.ConditionQueued).Message)
	if got.Status.Queue == nil || got.Status.Queue.LocalQueue != "team-queue" || got.Status.Queue.Position != nil {
		t.Errorf("status.queue %+v, want team-queue without a position", got.Status.Queue)
	}
	writes := s.op.Writes.Namespace(s.ns)
	writes.WaitQuiet(t, 3*time.Second)
	before := writes.Count("patch", "trainingjobs")
	testenv.Consistently(t, "the refreshes write nothing", 3*positionRefresh, func(context.Context) error {
		if n := writes.Count("patch", "trainingjobs"); n != before {
			return fmt.Errorf("%d status writes while nothing changed", n-before)
		}
		return nil
	})
}

// TestQueueWaitIsObservedOnceFromKueuesAdmission: the queue-wait histogram
// gets one sample per admission, measured from the Job's creation to the
// Workload's Admitted time, and none again when the operator restarts.
func TestQueueWaitIsObservedOnceFromKueuesAdmission(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})
	hist := s.op.Reconciler.Metrics.QueueWait.WithLabelValues(s.ns, "team-queue")

	holder := s.trainingJob("holder", "team-queue", 1, 1)
	s.create(t, holder)
	s.waitTJ(t, holder, "Admitted", admitted)
	holderWait, _, _ := s.waited(t, "holder-r1")
	waiter := s.trainingJob("waiter", "team-queue", 1, 1)
	s.create(t, waiter)
	s.waitTJ(t, waiter, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })
	// Long enough a wait that a measure from anything but Kueue's record
	// would differ from it.
	time.Sleep(2 * time.Second)
	if err := s.c.Delete(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	s.waitTJ(t, waiter, "Admitted", admitted)
	want, job, admittedAt := s.waited(t, "waiter-r1")

	// The sample is taken right after the status write that records the
	// admission.
	testenv.Eventually(t, "two admissions observed", func(context.Context) (bool, error) {
		count, _ := histogram(t, hist)
		return count >= 2, nil
	})
	count, sum := histogram(t, hist)
	if count != 2 {
		t.Fatalf("queue_wait_seconds has %d samples, want 2 (one per admission)", count)
	}
	if sum != want+holderWait {
		t.Errorf("queue_wait_seconds sum %v, want %v (waiter: Job created %s, admitted %s) + %v (holder)", sum, want+holderWait, job.CreationTimestamp.UTC(), admittedAt.UTC(), holderWait)
	}

	// A restarted operator reconciles the admitted job and observes
	// nothing again.
	if err := s.op.Stop(); err != nil {
		t.Fatal(err)
	}
	op, err := harness.StartOperator(operatorCfg, scheme, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	op.Writes.Namespace(s.ns).WaitQuiet(t, 3*time.Second)
	if count, _ := histogram(t, op.Reconciler.Metrics.QueueWait.WithLabelValues(s.ns, "team-queue")); count != 2 {
		t.Errorf("after a restart queue_wait_seconds has %d samples, want still 2", count)
	}
}

// waited is how long a Job waited for Kueue by Kueue's own record: from
// the Job's creation to its Workload's Admitted time.
func (s *stack) waited(t *testing.T, jobName string) (float64, *batchv1.Job, time.Time) {
	t.Helper()
	job := s.waitJob(t, jobName, "admitted", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
	wl := s.waitWorkload(t, job, "Admitted", func(wl *unstructured.Unstructured) bool { return conditionStatus(wl, "Admitted") == "True" })
	at := conditionTime(t, wl, "Admitted")
	return at.Sub(job.CreationTimestamp.Time).Seconds(), job, at
}

func conditionTime(t *testing.T, u *unstructured.Unstructured, typ string) time.Time {
	t.Helper()
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			at, err := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
			if err != nil {
				t.Fatal(err)
			}
			return at
		}
	}
	t.Fatalf("no condition %s", typ)
	return time.Time{}
}

// histogram returns a histogram's sample count and sum.
func histogram(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := o.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestPriorityClassChangeWhileQueued: raising a queued TrainingJob's
// WorkloadPriorityClass reaches its Job, Kueue re-prioritises the
// Workload, and the job now preempts the one that held the quota.
func TestPriorityClassChangeWhileQueued(t *testing.T) {
	s := startStack(t)
	s.createQueues(t, "team-queue", quota{cpu: "4", memory: "8Gi", gpu: "1"})
	low, mid, high := s.ns+"-low", s.ns+"-mid", s.ns+"-high"
	s.createPriorityClass(t, low, 10)
	s.createPriorityClass(t, mid, 100)
	s.createPriorityClass(t, high, 1000)

	holder := s.trainingJob("holder", "team-queue", 1, 1)
	holder.Labels = map[string]string{trainingv1alpha1.LabelKueuePriorityClass: mid}
	s.create(t, holder)
	s.waitTJ(t, holder, "Admitted", admitted)
	waiter := s.trainingJob("waiter", "team-queue", 1, 1)
	waiter.Labels = map[string]string{trainingv1alpha1.LabelKueuePriorityClass: low}
	s.create(t, waiter)
	s.waitTJ(t, waiter, "Queued", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonWaiting) })
	job := s.waitJob(t, "waiter-r1", "created", func(*batchv1.Job) bool { return true })

	testenv.Eventually(t, "the user raises the waiter's priority class", func(ctx context.Context) (bool, error) {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(waiter), waiter); err != nil {
			return false, err
		}
		waiter.Labels[trainingv1alpha1.LabelKueuePriorityClass] = high
		err := s.c.Update(ctx, waiter)
		return err == nil, ignoreConflict(err)
	})
	s.waitJob(t, job.Name, "carries the new priority class", func(j *batchv1.Job) bool {
		return j.Labels[trainingv1alpha1.LabelKueuePriorityClass] == high
	})
	s.waitWorkload(t, job, "re-prioritised", func(wl *unstructured.Unstructured) bool {
		p, _, _ := unstructured.NestedInt64(wl.Object, "spec", "priority")
		return p == 1000
	})
	s.waitTJ(t, waiter, "Admitted by preempting the holder", admitted)
	s.waitTJ(t, holder, "Queued after the preemption", func(tj *trainingv1alpha1.TrainingJob) bool { return queued(tj, tjcontroller.ReasonEvicted) })
	t.Logf("writes on Job %s: %v", job.Name, s.jobWrites(t, job))
}
