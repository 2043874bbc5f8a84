package jobcontroller

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestFinishedJobIsCachedWithoutWhatItsPodsWereBuiltFrom: once a
// TrainingJob finished, the operator's cache holds it without its command,
// args, environment and pod template (a user's can be kilobytes, and
// nothing reads them after the end), and keeps the rest. An operator
// started afterwards reconciles the finished job from that slim copy
// without an error, a write or an event.
func TestFinishedJobIsCachedWithoutWhatItsPodsWereBuiltFrom(t *testing.T) {
	scheme := harness.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	first, err := harness.StartOperator(env.Config, scheme, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopFirst := sync.OnceValue(first.Stop)
	t.Cleanup(func() { _ = stopFirst() })
	ns := testenv.CreateNamespace(t, c, "finishedcache")
	tj := newTJ(ns, "sweep", 2)
	tj.Spec.Command = []string{"torchrun", "--nproc-per-node=1", "train.py"}
	tj.Spec.Args = []string{"--epochs=90", "--lr=0.1"}
	tj.Spec.Env = []corev1.EnvVar{{Name: "DATASET", Value: "imagenet"}, {Name: "SEED", Value: "7"}}
	tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{
		Labels:      map[string]string{"team": "vision"},
		Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(tj)
	pods := waitPods(t, c, ns, "sweep-r1", 2)
	running := &trainingv1alpha1.TrainingJob{}
	if err := first.Reconciler.Client.Get(t.Context(), key, running); err != nil {
		t.Fatal(err)
	}
	if running.Spec.Template == nil || len(running.Spec.Command) == 0 || len(running.Spec.Env) == 0 {
		t.Errorf("the cached running job lost what its pods are built from: %+v", running.Spec)
	}
	for i := range pods {
		kubelet(t, c, &pods[i], corev1.PodRunning, 0, false)
	}
	for i := range pods {
		kubelet(t, c, &pods[i], corev1.PodSucceeded, 0, false)
	}
	live := waitTJ(t, c, tj, "Succeeded", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionSucceeded)
	})
	want := live.Spec.DeepCopy()
	want.Command, want.Args, want.Env, want.Template = nil, nil, nil, nil
	cached := &trainingv1alpha1.TrainingJob{}
	testenv.Eventually(t, "the cache has the job as finished", func(ctx context.Context) (bool, error) {
		err := first.Reconciler.Client.Get(ctx, key, cached)
		return err == nil && conditions.IsTrue(cached, commonv1alpha1.ConditionSucceeded), err
	})
	if diff := cmp.Diff(*want, cached.Spec); diff != "" {
		t.Errorf("the cached finished job's spec (-want +got):\n%s", diff)
	}
	if err := stopFirst(); err != nil {
		t.Fatal(err)
	}

	// A second operator finds the job finished in its first list.
	live = waitTJ(t, c, tj, "the job as the first operator left it", func(*trainingv1alpha1.TrainingJob) bool { return true })
	var mu sync.Mutex
	var reconciled int
	var failures []error
	second, err := harness.StartOperator(env.Config, scheme, harness.Options{Wrap: func(r reconcile.Reconciler) reconcile.Reconciler {
		return reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			res, err := r.Reconcile(ctx, req)
			if req.NamespacedName == key {
				mu.Lock()
				defer mu.Unlock()
				reconciled++
				if err != nil {
					failures = append(failures, err)
				}
			}
			return res, err
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	testenv.Eventually(t, "the second operator reconciled the finished job", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return reconciled > 0, nil
	})
	mu.Lock()
	if len(failures) > 0 {
		t.Errorf("reconciles of the finished job failed: %v", failures)
	}
	mu.Unlock()
	// The job and the events about it; the run's rank names are another
	// controller's, which may still be retiring them.
	ofTheJob := second.Writes.Matching(func(w testenv.Write) bool {
		return w.Namespace == ns && (strings.HasPrefix(w.Resource, "trainingjobs") || w.Resource == "events" && strings.HasPrefix(w.Name, tj.Name+"."))
	})
	if n := ofTheJob.Total(); n != 0 {
		t.Errorf("the second operator wrote %d times of the finished job (%s), want none", n, ofTheJob)
	}
	after := &trainingv1alpha1.TrainingJob{}
	if err := c.Get(t.Context(), key, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != live.ResourceVersion {
		t.Errorf("the finished job changed after the second operator's reconcile: status %+v", after.Status)
	}
}
