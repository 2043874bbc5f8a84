package kueuecompat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// positionRefresh is how often queued Notebooks read their position in
// these tests; the operator's default is 30 s.
const positionRefresh = 2 * time.Second

// position is a Notebook's place in its queue, 0 when it shows none.
func position(nb *notebooksv1alpha1.Notebook) int32 {
	if nb.Status.Queue == nil {
		return 0
	}
	return ptr.Deref(nb.Status.Queue.Position, 0)
}

// waitPosition waits until nb is Queued at pos in LocalQueue queue, in
// status and in the Queued condition's message.
func (s *stack) waitPosition(t *testing.T, nb *notebooksv1alpha1.Notebook, queue string, pos int32) *notebooksv1alpha1.Notebook {
	t.Helper()
	want := fmt.Sprintf("position %d in LocalQueue %s", pos, queue)
	return s.waitNotebook(t, nb, want, func(got *notebooksv1alpha1.Notebook) bool {
		c := conditions.Get(got, notebooksv1alpha1.ConditionQueued)
		return got.Status.Phase == notebooksv1alpha1.PhaseQueued && c != nil && c.Status == metav1.ConditionTrue &&
			position(got) == pos && got.Status.Queue.LocalQueue == queue && strings.Contains(c.Message, want)
	})
}

// TestKueueQueuedNotebooksShowTheirPosition: with quota for one notebook,
// the two created after the first wait Queued at places 1 and 2 in their
// LocalQueue, as Kueue's visibility API (served by the real Kueue behind
// the API server's aggregator) reports them, in status, in the Queued
// condition and in the printer column; when the first stops, the second
// is admitted and shows no place any more, and the third moves up to 1.
func TestKueueQueuedNotebooksShowTheirPosition(t *testing.T) {
	s := startStackWith(t, stackOptions{visibility: true, positionRefresh: positionRefresh})
	s.createQueues(t, "team", "1", "0")
	t.Cleanup(func() {
		if t.Failed() {
			s.logPendingWorkloads(t, "team")
		}
	})

	first := s.runningNotebook(t, "first", "team", "1", 0)
	// The second is created, and has its Workload, before the third, so
	// that Kueue orders them by creation.
	second := s.notebookIn("second", "team", "1", 0)
	s.create(t, second)
	s.waitPosition(t, second, "team", 1)
	// Kueue orders Workloads of one priority by creation time, which the
	// API server keeps to the second, and leaves a tie in any order: the
	// third's Workload is made in a later second than the second's, which
	// exists now (it has a place).
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	third := s.notebookIn("third", "team", "1", 0)
	s.create(t, third)
	got := s.waitPosition(t, third, "team", 2)
	t.Logf("Queued condition: %s", conditions.Get(got, notebooksv1alpha1.ConditionQueued).Message)
	s.waitPosition(t, second, "team", 1)
	if col := s.printerColumn(t, third, "Position"); col != float64(2) {
		t.Errorf("printer column Position of %s: %v, want 2", third.Name, col)
	}

	s.updateNotebook(t, first, func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Suspend = true })
	suspended := s.waitNotebook(t, first, "Suspended", func(nb *notebooksv1alpha1.Notebook) bool {
		return nb.Status.Phase == notebooksv1alpha1.PhaseSuspended
	})
	s.actOutTermination(t, first)
	s.waitReleased(t, suspended)
	s.actOutAdmittedPod(t, second)
	admittedNb := s.waitNotebook(t, second, "Running without a place in the queue", func(nb *notebooksv1alpha1.Notebook) bool {
		return running(nb) && admitted(nb) && nb.Status.Queue == nil
	})
	if c := conditions.Get(admittedNb, notebooksv1alpha1.ConditionQueued); strings.Contains(c.Message, "position") {
		t.Errorf("an admitted Notebook's Queued condition names a position: %q", c.Message)
	}
	s.waitPosition(t, third, "team", 1)
}

// printerColumn is the value of a Notebook's printer column, as kubectl
// get shows it.
func (s *stack) printerColumn(t *testing.T, nb *notebooksv1alpha1.Notebook, column string) any {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cs.RESTClient().Get().AbsPath("/apis/notebooks.mlplatform.dev/v1alpha1/namespaces", nb.Namespace, "notebooks", nb.Name).
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

// logPendingWorkloads logs what Kueue's visibility API says of queue, to
// explain a failure.
func (s *stack) logPendingWorkloads(t *testing.T, queue string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cs.RESTClient().Get().AbsPath("/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces", s.ns, "localqueues", queue, "pendingworkloads").DoRaw(context.Background())
	t.Logf("Kueue's visibility API on LocalQueue %s: %s (error %v)", queue, b, err)
}
