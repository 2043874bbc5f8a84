package ha

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/e2e/quickstart"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// Bounds, not expectations: two shared cores.
const (
	scaleTimeout    = 5 * time.Minute
	handoverTimeout = 2 * time.Minute
	convergeTimeout = 20 * time.Minute
	replicas        = 2
	burstJobs       = 4
	burstNotebooks  = 3
)

var smallResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
}

// TestLeaderLossDuringBurst: with two replicas of every operator, half of a
// burst of TrainingJobs and Notebooks is created, every leader pod is
// deleted at once (no grace: a crash), and the rest is created while the
// standbys take over. Every object converges (jobs Succeeded in their first
// run, notebooks Ready) and no child was created twice.
func TestLeaderLossDuringBurst(t *testing.T) {
	e := steps.Connect(t)
	ops := scaleOperators(t, e, replicas)
	ns := e.Namespace(t, "e2e-ha")

	jobs, notebooks := burst(t, ns)
	half := func(i int) bool { return i%2 == 0 }
	createSome(t, e, jobs, notebooks, half)
	handovers := killLeaders(t, e, ops)
	createSome(t, e, jobs, notebooks, func(i int) bool { return !half(i) })
	for name, h := range handovers() {
		t.Logf("HANDOVER %s: %s", name, h)
	}

	for _, tj := range jobs {
		e.WaitCondition(t, tj, "Succeeded", metav1.ConditionTrue, "Failed", convergeTimeout)
	}
	for _, nb := range notebooks {
		e.WaitCondition(t, nb, "Ready", metav1.ConditionTrue, "Stalled", convergeTimeout)
	}
	for _, tj := range jobs {
		auditTrainingJob(t, e, tj)
	}
	for _, nb := range notebooks {
		auditNotebook(t, e, nb)
	}
}

// burst returns the objects of the burst: TrainingJobs of one and two
// workers (the two-worker ones with a checkpoint volume) and Notebooks.
func burst(t *testing.T, ns string) ([]*trainingv1alpha1.TrainingJob, []*notebooksv1alpha1.Notebook) {
	var jobs []*trainingv1alpha1.TrainingJob
	for i := range burstJobs {
		tj := &trainingv1alpha1.TrainingJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tj-%d", i)},
			Spec: trainingv1alpha1.TrainingJobSpec{
				Framework: "pytorch", Image: steps.Image(t, "pytorch"), Workers: int32(1 + i%2),
				Resources: &commonv1alpha1.Resources{ResourceRequirements: smallResources},
				Env:       []corev1.EnvVar{{Name: "TRAIN_STEPS", Value: "10"}, {Name: "CHECKPOINT_EVERY", Value: "5"}},
				RunPolicy: trainingv1alpha1.RunPolicy{CleanPodPolicy: "None"},
			},
		}
		if tj.Spec.Workers > 1 {
			tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: ptr.To(resource.MustParse("64Mi")), DeletionPolicy: commonv1alpha1.DeletionPolicyDelete}
		}
		jobs = append(jobs, tj)
	}
	var notebooks []*notebooksv1alpha1.Notebook
	for i := range burstNotebooks {
		notebooks = append(notebooks, &notebooksv1alpha1.Notebook{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("nb-%d", i)},
			Spec: notebooksv1alpha1.NotebookSpec{
				Image:     steps.Image(t, "jupyter"),
				Resources: commonv1alpha1.Resources{ResourceRequirements: smallResources},
				Workspace: notebooksv1alpha1.Workspace{Size: ptr.To(resource.MustParse("64Mi")), DeletionPolicy: commonv1alpha1.DeletionPolicyDelete},
			},
		})
	}
	return jobs, notebooks
}

func createSome(t *testing.T, e *steps.Env, jobs []*trainingv1alpha1.TrainingJob, notebooks []*notebooksv1alpha1.Notebook, pick func(int) bool) {
	t.Helper()
	var objs []client.Object
	for i, tj := range jobs {
		if pick(i) {
			objs = append(objs, tj)
		}
	}
	for i, nb := range notebooks {
		if pick(i) {
			objs = append(objs, nb)
		}
	}
	for _, o := range objs {
		if err := e.C.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// scaleOperators scales every operator Deployment of the release to n
// replicas, waits until they are available and each has a leader, and
// scales them back when the test ends.
func scaleOperators(t *testing.T, e *steps.Env, n int32) []Operator {
	t.Helper()
	var ops []Operator
	for _, name := range quickstart.Operators {
		d := e.OperatorDeployment(t, name)
		before := ptr.Deref(d.Spec.Replicas, 1)
		setReplicas(t, e, d, n)
		t.Cleanup(func() { setReplicas(t, e, d, before) })
		ops = append(ops, Operator{Deployment: d})
	}
	for i := range ops {
		d := ops[i].Deployment
		steps.Until(t, fmt.Sprintf("%d available replicas of %s and a leader", n, d.Name), scaleTimeout, func(ctx context.Context) (bool, error) {
			if ok, err := e.RolledOut(ctx, d); !ok || err != nil {
				return false, err
			}
			lease, err := FindLease(ctx, e.CS, d)
			ops[i].Lease = lease
			return lease != "", err
		})
	}
	return ops
}

func setReplicas(t *testing.T, e *steps.Env, d *appsv1.Deployment, n int32) {
	t.Helper()
	ctx := context.Background()
	scale, err := e.CS.AppsV1().Deployments(d.Namespace).GetScale(ctx, d.Name, metav1.GetOptions{})
	if err == nil && scale.Spec.Replicas != n {
		scale.Spec.Replicas = n
		_, err = e.CS.AppsV1().Deployments(d.Namespace).UpdateScale(ctx, d.Name, scale, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Errorf("scale %s to %d: %v", d.Name, n, err)
	}
}

// killLeaders deletes the leader pod of every operator without grace and
// watches each Lease until a standby holds it. The returned function waits
// for every handover and returns their times; a standby that never takes
// over fails the test.
func killLeaders(t *testing.T, e *steps.Env, ops []Operator) func() map[string]time.Duration {
	t.Helper()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[string]time.Duration{}
	)
	for _, op := range ops {
		leader, _, err := Leader(t.Context(), e.CS, quickstart.Namespace, op.Lease)
		if err != nil || leader == "" {
			t.Fatalf("lease %s: no leader (%v)", op.Lease, err)
		}
		start := time.Now()
		if err := e.CS.CoreV1().Pods(quickstart.Namespace).Delete(t.Context(), leader, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatalf("delete leader %s: %v", leader, err)
		}
		t.Logf("deleted %s, the leader of %s", leader, op.Lease)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), handoverTimeout)
			defer cancel()
			holder, took, err := Handover(ctx, e.CS, quickstart.Namespace, op.Lease, leader, start, 100*time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%s: no standby took over: %v", op.Deployment.Name, err)
				return
			}
			t.Logf("%s: %s leads %s after the leader's deletion", op.Deployment.Name, holder, took.Round(time.Millisecond))
			out[op.Deployment.Name] = took
		}()
	}
	return func() map[string]time.Duration {
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		return out
	}
}

// auditTrainingJob: one run (no restart), one Job, its headless Service
// (none for one worker),
// and as many pods created as workers (job controller's events and the
// pods kept by cleanPodPolicy None).
func auditTrainingJob(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob) {
	t.Helper()
	ctx := t.Context()
	if tj.Status.Run != 1 || tj.Status.RestartCount != 0 {
		t.Errorf("TrainingJob %s: run %d, restarts %d; want run 1 and no restart", tj.Name, tj.Status.Run, tj.Status.RestartCount)
	}
	var jobs batchv1.JobList
	if err := e.C.List(ctx, &jobs, client.InNamespace(tj.Namespace), client.MatchingLabels{trainingv1alpha1.LabelJobName: tj.Name}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Errorf("TrainingJob %s: %d Jobs (%v), want 1", tj.Name, len(jobs.Items), names(jobs.Items))
		return
	}
	job := &jobs.Items[0]
	// A run of one pod has no peers to find and gets no Service.
	wantServices := 1
	if tj.Spec.Workers <= 1 {
		wantServices = 0
	}
	if n := ownedCount(t, e, &corev1.ServiceList{}, job.Namespace, job.UID); n != wantServices {
		t.Errorf("TrainingJob %s (%d workers): Job %s owns %d Services, want %d (a headless Service for more than one pod)", tj.Name, tj.Spec.Workers, job.Name, n, wantServices)
	}
	created := eventCount(t, e, job.Namespace, "Job", job.Name, "SuccessfulCreate", "")
	var pods corev1.PodList
	if err := e.C.List(ctx, &pods, client.InNamespace(tj.Namespace), client.MatchingLabels{trainingv1alpha1.LabelJobName: tj.Name}); err != nil {
		t.Fatal(err)
	}
	if created != tj.Spec.Workers || int32(len(pods.Items)) != tj.Spec.Workers {
		t.Errorf("TrainingJob %s: %d pod creations, %d pods (%v); want %d", tj.Name, created, len(pods.Items), names(pods.Items), tj.Spec.Workers)
	}
	if tj.Spec.Checkpoint != nil {
		auditCheckpointClaim(t, e, tj)
	}
}

// auditCheckpointClaim: one checkpoint claim, this TrainingJob's, reported
// created at most once. Events are best effort: a leader killed between
// creating the claim and recording the event loses the event, never the
// claim (a nightly lost both jobs' events created during the handover),
// so the claim itself is the evidence and the events may only not repeat.
func auditCheckpointClaim(t *testing.T, e *steps.Env, tj *trainingv1alpha1.TrainingJob) {
	t.Helper()
	if n := eventCount(t, e, tj.Namespace, "TrainingJob", tj.Name, "CheckpointClaimCreated", ""); n > 1 {
		t.Errorf("TrainingJob %s: checkpoint claim reported created %d times", tj.Name, n)
	}
	// The operator names the claim it creates <job>-checkpoint.
	pvc := &corev1.PersistentVolumeClaim{}
	if err := e.C.Get(t.Context(), types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name + "-checkpoint"}, pvc); err != nil {
		t.Errorf("TrainingJob %s: checkpoint claim: %v", tj.Name, err)
		return
	}
	if !metav1.IsControlledBy(pvc, tj) {
		t.Errorf("TrainingJob %s: checkpoint claim %s is controlled by %v, want this TrainingJob (deletionPolicy Delete)", tj.Name, pvc.Name, metav1.GetControllerOf(pvc))
	}
}

// auditNotebook: one StatefulSet whose pod was created once and never
// restarted.
func auditNotebook(t *testing.T, e *steps.Env, nb *notebooksv1alpha1.Notebook) {
	t.Helper()
	var sets appsv1.StatefulSetList
	if err := e.C.List(t.Context(), &sets, client.InNamespace(nb.Namespace)); err != nil {
		t.Fatal(err)
	}
	var mine []appsv1.StatefulSet
	for _, s := range sets.Items {
		if metav1.IsControlledBy(&s, nb) {
			mine = append(mine, s)
		}
	}
	if len(mine) != 1 {
		t.Errorf("Notebook %s: %d StatefulSets (%v), want 1", nb.Name, len(mine), names(mine))
		return
	}
	sts := mine[0]
	if n := eventCount(t, e, nb.Namespace, "StatefulSet", sts.Name, "SuccessfulCreate", "create Pod "); n != 1 {
		t.Errorf("Notebook %s: StatefulSet %s created its pod %d times, want once", nb.Name, sts.Name, n)
	}
	var pods corev1.PodList
	if err := e.C.List(t.Context(), &pods, client.InNamespace(nb.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !metav1.IsControlledBy(&p, &sts) {
			continue
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount != 0 {
				t.Errorf("Notebook %s: container %s of pod %s restarted %d times", nb.Name, c.Name, p.Name, c.RestartCount)
			}
		}
	}
}

// eventCount sums the counts of the events with reason about the object
// kind/name whose message starts with prefix.
func eventCount(t *testing.T, e *steps.Env, ns, kind, name, reason, prefix string) int32 {
	t.Helper()
	list, err := e.CS.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name + ",reason=" + reason,
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, ev := range list.Items {
		if strings.HasPrefix(ev.Message, prefix) {
			n += max(ev.Count, 1)
		}
	}
	return n
}

// ownedCount counts the objects of list in ns that owner (by UID) owns.
func ownedCount(t *testing.T, e *steps.Env, list *corev1.ServiceList, ns string, owner types.UID) int {
	t.Helper()
	if err := e.C.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		for _, ref := range s.OwnerReferences {
			if ref.UID == owner {
				n++
			}
		}
	}
	return n
}

func names[T any, P interface {
	*T
	GetName() string
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	return out
}
