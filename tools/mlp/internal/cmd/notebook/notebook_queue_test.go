package notebook

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// TestNotebookShowsQueuePosition: mlp notebook list shows a queued
// Notebook's place in its Kueue LocalQueue in the CRD's Position column,
// and describe beside its phase, as mlp train does for TrainingJobs; a
// queued Notebook whose place is unknown shows its phase alone.
func TestNotebookShowsQueuePosition(t *testing.T) {
	c := clitest.AdminClient(t)
	ns := clitest.NewNamespace(t)
	ctx := context.Background()
	for name, pos := range map[string]*int32{"alice": ptr.To[int32](2), "bob": nil} {
		nb := &notebooksv1alpha1.Notebook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		nb.Spec.QueueName = "team-queue"
		if err := c.Create(ctx, nb); err != nil {
			t.Fatal(err)
		}
		nb.Status.Phase, nb.Status.Image = notebooksv1alpha1.PhaseQueued, "jupyter:1"
		nb.Status.Queue = &commonv1alpha1.QueueStatus{LocalQueue: "team-queue", Position: pos}
		if err := c.Status().Update(ctx, nb); err != nil {
			t.Fatal(err)
		}
	}

	list := clitest.Run(t, ns, "notebook", "list")
	if list.Code != 0 {
		t.Fatalf("list: exit %d, stderr %q", list.Code, list.Err)
	}
	clitest.Golden(t, "notebook-list-queued", clitest.NormalizeTable(clitest.Normalize(list.Out, ns), "AGE"))

	for name, want := range map[string]string{"alice": "Queued (position 2 in team-queue)", "bob": "Queued\n"} {
		r := clitest.Run(t, ns, "notebook", "describe", name)
		if r.Code != 0 {
			t.Fatalf("describe %s: exit %d, stderr %q", name, r.Code, r.Err)
		}
		status := ""
		for _, l := range strings.SplitAfter(r.Out, "\n") {
			if strings.HasPrefix(l, "Status:") {
				status = strings.TrimLeft(strings.TrimPrefix(l, "Status:"), " ")
			}
		}
		if !strings.HasPrefix(status, want) {
			t.Errorf("describe %s: Status %q, want %q:\n%s", name, status, want, r.Out)
		}
	}
}
