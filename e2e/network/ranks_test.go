package network

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// rankPort is where every rank of the ranks test serves.
const rankPort = 8080

// ranksDone is what a rank of the ranks test prints once its connections
// were judged by its own script; it keeps serving afterwards.
const ranksDone = "connections-finished"

// TestTrainingJobRanksAdmitOnlyTheirOwnJob: the two ranks of a real
// TrainingJob (native backend, busybox) behind the operator's rank
// NetworkPolicy serve HTTP on a port of their own and reach each other by
// their stable host names, the operator's progress endpoint and an
// unguarded server; a rank of another TrainingJob of the namespace and a
// pod of another namespace that carries the job's labels are refused by
// both ranks while they reach the unguarded server, so the refusals are
// the policy's. The other job's template claims the first job's name in
// its labels, which cannot widen the policy.
func TestTrainingJobRanksAdmitOnlyTheirOwnJob(t *testing.T) {
	t.Parallel()
	e := steps.Connect(t)
	cluster.RequireNetworkPolicyEnforcement(t, e.CS)
	ns := e.Namespace(t, "e2e-net-ranks")
	other := e.Namespace(t, "e2e-net-ranks-other")
	image, err := cluster.BusyboxImage(t.Context(), e.CS)
	if err != nil {
		t.Fatal(err)
	}
	open := openServer(t, e, ns, image)
	progress := progressURL(t, e)

	// Rank i of run 1 is <job>-r1-<i>, resolvable through the
	// namespace's headless Service for the ranks, trainingjob-ranks (the
	// native backend's topology).
	var ranks []string
	for i := range 2 {
		ranks = append(ranks, fmt.Sprintf("http://ranks-r1-%d.trainingjob-ranks:%d/", i, rankPort))
	}
	reach := append(append([]string{}, ranks...), open, progress)
	serve := fmt.Sprintf("mkdir -p /tmp/www && echo rank > /tmp/www/index.html && httpd -p %d -h /tmp/www\n", rankPort)
	// The script runs in a subshell, as it exits when done: the rank then
	// keeps serving its peer until the test deletes the job.
	tj := connectionJob(ns, "ranks", image, serve+"(\n"+cluster.ConnectionScript(reach, nil)+")\necho "+ranksDone+"\nexec sleep 3600\n")
	tj.Spec.Workers = 2
	if err := e.C.Create(t.Context(), tj); err != nil {
		t.Fatalf("create TrainingJob: %v", err)
	}
	t.Cleanup(func() { _ = e.C.Delete(context.Background(), tj) })
	logs := waitRanks(t, e, tj, 2)
	// The operator writes the policy before the run's Job.
	policy := &networkingv1.NetworkPolicy{}
	if err := e.C.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ranks-ranks"}, policy); err != nil || !metav1.IsControlledBy(policy, tj) {
		t.Errorf("the ranks of TrainingJob %s run without the operator's NetworkPolicy ranks-ranks: %v %v", tj.Name, err, policy.OwnerReferences)
	}
	var ips []string
	for pod, l := range logs {
		if err := cluster.JudgeConnections(l.logs, reach, nil); err != nil {
			t.Errorf("rank %s/%s of TrainingJob %s, expected to reach %v: %v\n%s", ns, pod, tj.Name, reach, err, l.logs)
		} else {
			t.Logf("rank %s/%s of TrainingJob %s: reached %v (%d rounds)", ns, pod, tj.Name, reach, strings.Count(l.logs, "round "))
		}
		ips = append(ips, fmt.Sprintf("http://%s:%d/", l.ip, rankPort))
	}

	// A rank of another TrainingJob of the namespace, whose template claims
	// the first job's name: the operator's labels win.
	intruder := connectionJob(ns, "intruder", image, cluster.ConnectionScript([]string{open}, ranks))
	intruder.Spec.Template = &trainingv1alpha1.PodTemplatePatch{Labels: map[string]string{trainingv1alpha1.LabelJobName: tj.Name}}
	if err := e.C.Create(t.Context(), intruder); err != nil {
		t.Fatalf("create TrainingJob: %v", err)
	}
	e.WaitCondition(t, intruder, "Succeeded", metav1.ConditionTrue, "Failed", trainTimeout)
	intruderLogs, err := e.RunLogs(t.Context(), intruder, 1)
	if err != nil {
		t.Fatal(err)
	}
	for pod, l := range intruderLogs {
		if err := cluster.JudgeConnections(l, []string{open}, ranks); err != nil {
			t.Errorf("rank %s/%s of TrainingJob %s, expected to reach %s and be refused by %v: %v\n%s", ns, pod, intruder.Name, open, ranks, err, l)
		} else {
			t.Logf("rank %s/%s of TrainingJob %s: reached %s, refused by %v (%d rounds)", ns, pod, intruder.Name, open, ranks, strings.Count(l, "round "))
		}
	}

	// A pod of another namespace with the labels of the job's ranks: the
	// policy admits its own namespace only.
	outsider := steps.ClientPod("outsider", image, "")
	outsider.Labels = map[string]string{"app.kubernetes.io/managed-by": "trainingjob-operator", trainingv1alpha1.LabelJobName: tj.Name}
	expect(t, e, other, outsider, []string{open}, ips)
}

// rank is what waitRanks learned about one rank.
type rank struct{ logs, ip string }

// waitRanks waits until each of the n ranks of tj's first run printed
// ranksDone, and returns their logs and addresses by pod name.
func waitRanks(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob, n int) map[string]rank {
	t.Helper()
	out := map[string]rank{}
	steps.Until(t, fmt.Sprintf("the %d ranks of %s to finish their connections", n, tj.Name), trainTimeout, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.C.List(ctx, &pods, client.InNamespace(tj.Namespace), client.MatchingLabels{trainingv1alpha1.LabelJobName: tj.Name}); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				continue
			}
			if l := cluster.PodLogs(e.CS, p.Namespace, p.Name); strings.Contains(l, ranksDone) {
				out[p.Name] = rank{logs: l, ip: p.Status.PodIP}
			}
		}
		return len(out) == n, nil
	})
	return out
}
