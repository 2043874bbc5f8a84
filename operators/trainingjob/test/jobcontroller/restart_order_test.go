package jobcontroller

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/phase"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestRestartedOperatorReconcilesWhatItNeverSawFirst restarts the operator
// on the priority queue with one worker, after a job was created while no
// operator ran: of the namespace's jobs, the new one is reconciled first,
// before the ones the last operator converged, which all come from the same
// first list (controller-runtime queues that list at low priority, the new
// job included, unless phase.UnreconciledFirst raises it). Jobs of other
// tests in the cluster may come in between; they are not counted.
func TestRestartedOperatorReconcilesWhatItNeverSawFirst(t *testing.T) {
	scheme := harness.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	op, err := harness.StartOperator(env.Config, scheme, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	ns := testenv.CreateNamespace(t, c, "restartorder")
	const converged = 12
	for i := range converged {
		if err := c.Create(t.Context(), newTJ(ns, fmt.Sprintf("seen-%02d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the operator reconciled every job at its generation", func(ctx context.Context) (bool, error) {
		list := &trainingv1alpha1.TrainingJobList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for i := range list.Items {
			if !phase.Reconciled(&list.Items[i]) {
				return false, nil
			}
		}
		return len(list.Items) == converged, nil
	})
	if err := op.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), newTJ(ns, "unseen", 1)); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var order []string
	op, err = harness.StartOperator(env.Config, scheme, harness.Options{PriorityQueue: true, Wrap: func(r reconcile.Reconciler) reconcile.Reconciler {
		return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if req.Namespace == ns {
				mu.Lock()
				order = append(order, req.Name)
				mu.Unlock()
			}
			return r.Reconcile(ctx, req)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	testenv.Eventually(t, "the restarted operator reconciled every job of the namespace", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for _, name := range order {
			seen[name] = true
		}
		return len(seen) == converged+1, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if order[0] != "unseen" {
		t.Errorf("the restarted operator reconciled the namespace's jobs in the order %v, want the job it never saw first", order)
	}
}
