package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestRankNetworkPolicySelectsTheRanksOfBothBackends: the policy's pod
// selector and its only peer match every pod template of the job's child
// on both backends (each role of a Kubeflow job), in the same namespace
// only and on every port; another TrainingJob whose template labels claim
// the first job's name builds pods that neither selector matches.
func TestRankNetworkPolicySelectsTheRanksOfBothBackends(t *testing.T) {
	victim := newTrainingJob("team-a", "victim", 3)
	intruder := newTrainingJob("team-a", "intruder", 2)
	intruder.Spec.Template = &trainingv1alpha1.PodTemplatePatch{Labels: map[string]string{
		trainingv1alpha1.LabelJobName: "victim", "app.kubernetes.io/managed-by": operatorName,
	}}
	np := backend.NetworkPolicy(operatorName, victim)
	if np.Name != "victim-ranks" || np.Namespace != "team-a" {
		t.Errorf("policy %s/%s, want team-a/victim-ranks", np.Namespace, np.Name)
	}
	if !cmp.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Egress) != 0 {
		t.Errorf("policy types %v, egress %v: want ingress only", np.Spec.PolicyTypes, np.Spec.Egress)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 0 || len(np.Spec.Ingress[0].From) != 1 {
		t.Fatalf("ingress %+v, want one rule with one peer and every port", np.Spec.Ingress)
	}
	peer := np.Spec.Ingress[0].From[0]
	if peer.NamespaceSelector != nil || peer.IPBlock != nil || peer.PodSelector == nil {
		t.Fatalf("peer %+v, want a pod selector of the policy's own namespace", peer)
	}
	selects := selector(t, &np.Spec.PodSelector)
	admits := selector(t, peer.PodSelector)

	for name, be := range map[string]backend.Backend{
		"native":   nativejob.NewBackend(testSettings),
		"kubeflow": kubeflowjob.NewBackend(testSettings, nil),
	} {
		t.Run(name, func(t *testing.T) {
			ranks := templateLabels(t, be, victim)
			if len(ranks) == 0 {
				t.Fatal("no pod template in the child")
			}
			for _, l := range ranks {
				if !selects.Matches(labels.Set(l)) || !admits.Matches(labels.Set(l)) {
					t.Errorf("a rank labelled %v is not both guarded (%v) and admitted (%v)", l, selects, admits)
				}
			}
			for _, l := range templateLabels(t, be, intruder) {
				if selects.Matches(labels.Set(l)) || admits.Matches(labels.Set(l)) {
					t.Errorf("a rank of another TrainingJob, labelled %v, is selected by the victim's policy", l)
				}
			}
		})
	}
}

func selector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// templateLabels returns the labels of every pod template in the child
// that be builds for tj's first run, whatever its kind.
func templateLabels(t *testing.T, be backend.Backend, tj *trainingv1alpha1.TrainingJob) []map[string]string {
	t.Helper()
	child, err := be.Build(tj, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(child)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	var walk func(any)
	walk = func(v any) {
		switch m := v.(type) {
		case map[string]any:
			if tmpl, ok := m["template"].(map[string]any); ok {
				if spec, ok := tmpl["spec"].(map[string]any); ok && spec["containers"] != nil {
					meta, _ := tmpl["metadata"].(map[string]any)
					l := map[string]string{}
					if raw, ok := meta["labels"].(map[string]any); ok {
						for k, v := range raw {
							l[k] = fmt.Sprint(v)
						}
					}
					out = append(out, l)
				}
			}
			for _, e := range m {
				walk(e)
			}
		case []any:
			for _, e := range m {
				walk(e)
			}
		}
	}
	walk(u)
	return out
}

func getPolicy(ctx context.Context, c client.Client, ns, tj string) (*networkingv1.NetworkPolicy, error) {
	np := &networkingv1.NetworkPolicy{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: backend.NetworkPolicyName(tj)}, np)
	return np, err
}

// waitPolicy waits until the job's policy exists with exactly the spec the
// operator builds and is controlled by the job.
func waitPolicy(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob, what string) *networkingv1.NetworkPolicy {
	t.Helper()
	want := backend.NetworkPolicy(operatorName, tj).Spec
	var np *networkingv1.NetworkPolicy
	testenv.Eventually(t, what, func(ctx context.Context) (bool, error) {
		var err error
		np, err = getPolicy(ctx, c, tj.Namespace, tj.Name)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && metav1.IsControlledBy(np, tj) && cmp.Equal(want, np.Spec), err
	})
	return np
}

// TestRankNetworkPolicyIsOwnedAndConverged: a native TrainingJob gets its
// policy, controlled by it, with the selectors the operator builds; a
// policy widened by a user (every source admitted) is narrowed again and
// a deleted one is created again, both by the watch, without a reconcile
// of the job's own.
func TestRankNetworkPolicyIsOwnedAndConverged(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	tj := native(newTrainingJob(ns, "guarded", 2))
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	waitBatchJob(t, c, ns, "guarded-r1")
	np := waitPolicy(t, c, tj, "the ranks' NetworkPolicy")
	if np.Labels[trainingv1alpha1.LabelJobName] != "guarded" || np.Labels["app.kubernetes.io/managed-by"] != operatorName {
		t.Errorf("policy labels %v, want the job's and the operator's", np.Labels)
	}

	for what, widen := range map[string]func(*networkingv1.NetworkPolicySpec){
		"its rule replaced by one that admits everyone": func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
		},
		// What the policy had is all still there: only more is admitted.
		"a rule that admits everyone appended": func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = append(s.Ingress, networkingv1.NetworkPolicyIngressRule{})
		},
		"its peer widened to every namespace": func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
		},
	} {
		widened := waitPolicy(t, c, tj, "the policy as the operator wants it").DeepCopy()
		widen(&widened.Spec)
		if err := c.Update(t.Context(), widened); err != nil {
			t.Fatal(err)
		}
		np = waitPolicy(t, c, tj, "the policy narrowed again after "+what)
	}

	if err := c.Delete(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	again := waitPolicy(t, c, tj, "the deleted policy created again")
	if again.UID == np.UID {
		t.Errorf("the policy kept its UID %s after its deletion", np.UID)
	}
}

// TestRankNetworkPolicyNameTakenIsVisible: somebody else's NetworkPolicy
// under the job's policy name is left untouched; a job that has not
// started stalls with NameTaken (and its event) and gets no Job, so its
// ranks never run unguarded; a running job whose policy was replaced by a
// foreign one while the operator was down gets a warning event.
func TestRankNetworkPolicyNameTakenIsVisible(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	foreign := foreignPolicy(ns, "taken")
	if err := c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	tj := native(newTrainingJob(ns, "taken", 1))
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return condStatus(tj, commonv1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	stalled := conditionOf(got, commonv1alpha1.ConditionStalled)
	if stalled.Reason != commonv1alpha1.ReasonNameTaken || !strings.Contains(stalled.Message, "NetworkPolicy "+ns+"/taken-ranks exists and does not belong to this TrainingJob") {
		t.Errorf("Stalled %s: %q", stalled.Reason, stalled.Message)
	}
	testenv.WaitForEvent(t, c, tj, commonv1alpha1.ReasonNameTaken)
	testenv.Consistently(t, "no Job behind a foreign policy", 3*time.Second, func(ctx context.Context) error {
		jobs := &batchv1.JobList{}
		if err := c.List(ctx, jobs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(jobs.Items) != 0 {
			return fmt.Errorf("%d Jobs created behind a foreign NetworkPolicy", len(jobs.Items))
		}
		return nil
	})
	assertForeignUntouched(t, c, foreign)

	running := native(newTrainingJob(ns, "running", 1))
	if err := c.Create(t.Context(), running); err != nil {
		t.Fatal(err)
	}
	waitBatchJob(t, c, ns, "running-r1")
	ours := waitPolicy(t, c, running, "the running job's policy")
	op.stop(t)
	if err := c.Delete(t.Context(), ours); err != nil {
		t.Fatal(err)
	}
	replaced := foreignPolicy(ns, "running")
	if err := c.Create(t.Context(), replaced); err != nil {
		t.Fatal(err)
	}
	op = startOperator(t, nil)
	testenv.WaitForEvent(t, c, running, ReasonNetworkPolicyNameTaken)
	assertForeignUntouched(t, c, replaced)

	// Said once: later reconciles of the running job do not say it again
	// (each would be a write, an event count patch, for as long as the job
	// runs). They still try the policy (a refused apply), so that the job
	// gets it once the name is free.
	settle(t, c, op, ns, running)
	op.nsWrites.reset()
	for range 3 {
		if _, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(running)}); err != nil {
			t.Fatal(err)
		}
	}
	op.Writes.Namespace(ns).WaitQuiet(t, time.Second)
	if n := op.Writes.Namespace(ns).Count("patch", "events") + op.Writes.Namespace(ns).Count("create", "events"); n != 0 {
		t.Errorf("reconciles of a running job whose policy name is taken wrote %d events: %v", n, op.nsWrites.in(ns))
	}
}

// foreignPolicy is a NetworkPolicy of somebody else's under the name of
// TrainingJob tj's policy.
func foreignPolicy(ns, tj string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backend.NetworkPolicyName(tj), Labels: map[string]string{"team": "a"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
}

func assertForeignUntouched(t *testing.T, c client.Client, foreign *networkingv1.NetworkPolicy) {
	t.Helper()
	live := &networkingv1.NetworkPolicy{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(foreign), live); err != nil {
		t.Fatalf("the foreign policy: %v", err)
	}
	if len(live.OwnerReferences) != 0 || !cmp.Equal(live.Labels, foreign.Labels) || !cmp.Equal(live.Spec, foreign.Spec) {
		t.Errorf("the foreign policy was changed: owners %v labels %v spec %+v", live.OwnerReferences, live.Labels, live.Spec)
	}
}

// TestRankNetworkPolicyOffDeletesOnlyTheOperatorsOwn: an operator started
// with the policies off deletes the policy it made for a job (every job is
// reconciled at its start), makes none for a new job, which still runs, and
// leaves somebody else's policy under a job's policy name alone.
func TestRankNetworkPolicyOffDeletesOnlyTheOperatorsOwn(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	op := startOperator(t, nil)

	made := native(newTrainingJob(ns, "made", 1))
	if err := c.Create(t.Context(), made); err != nil {
		t.Fatal(err)
	}
	waitBatchJob(t, c, ns, "made-r1")
	np := waitPolicy(t, c, made, "the policy made while on")
	op.stop(t)

	startOperator(t, func(r *Reconciler) { r.NetworkPolicy = false })
	testenv.WaitGone(t, c, np)

	foreign := foreignPolicy(ns, "later")
	if err := c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	later := native(newTrainingJob(ns, "later", 1))
	if err := c.Create(t.Context(), later); err != nil {
		t.Fatal(err)
	}
	waitBatchJob(t, c, ns, "later-r1")
	testenv.Consistently(t, "no policy made while off", 3*time.Second, func(ctx context.Context) error {
		if _, err := getPolicy(ctx, c, ns, "made"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the policy of made: %w", err)
		}
		return nil
	})
	assertForeignUntouched(t, c, foreign)
}
