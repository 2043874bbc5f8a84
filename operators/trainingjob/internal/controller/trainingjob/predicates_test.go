package trainingjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
)

// TestWakesOnlyForWhatChangesTheOutcome: pod and child updates wake a
// reconcile only when they change what the operator records or does.
func TestWakesOnlyForWhatChangesTheOutcome(t *testing.T) {
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	withPhase := func(p corev1.PodPhase) *corev1.Pod {
		pod := running.DeepCopy()
		pod.Status.Phase = p
		return pod
	}
	deleting := running.DeepCopy()
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	pods := map[string]struct {
		before, after *corev1.Pod
		want          bool
	}{
		"a rank succeeds":     {before: running, after: withPhase(corev1.PodSucceeded), want: false},
		"a rank fails":        {before: running, after: withPhase(corev1.PodFailed), want: true},
		"a pod is deleted":    {before: running, after: deleting, want: true},
		"nothing of interest": {before: running, after: running.DeepCopy(), want: false},
	}
	for name, tc := range pods {
		if got := podMatters().Update(ctrlevent.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after}); got != tc.want {
			t.Errorf("pod update %q wakes %t, want %t", name, got, tc.want)
		}
	}
	// A pod first listed when it has already failed (a relist after a
	// lost watch) is news as its update to Failed would have been; any
	// other pod's creation says nothing the Job's status does not.
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"a pod first seen failed":  {withPhase(corev1.PodFailed), true},
		"a pod first seen running": {running, false},
		"a pod created pending":    {withPhase(corev1.PodPending), false},
	} {
		if got := podMatters().Create(ctrlevent.CreateEvent{Object: tc.pod}); got != tc.want {
			t.Errorf("pod creation event %q wakes %t, want %t", name, got, tc.want)
		}
	}
	// A deletion event carries the pod's last state in the cache. A pod
	// that succeeds leaves the cache of pods (CacheFields) with one that
	// says it runs: as its update to Succeeded did, it wakes nothing. The
	// end of a graceful deletion does, as does a failed pod's deletion.
	for name, tc := range map[string]struct {
		ev   ctrlevent.DeleteEvent
		want bool
	}{
		"a rank succeeded (or was removed at once)": {ctrlevent.DeleteEvent{Object: running}, false},
		"a rank deleted gracefully":                 {ctrlevent.DeleteEvent{Object: deleting}, true},
		"a failed rank deleted":                     {ctrlevent.DeleteEvent{Object: withPhase(corev1.PodFailed)}, true},
		"a rank gone while the watch was down":      {ctrlevent.DeleteEvent{Object: running, DeleteStateUnknown: true}, true},
	} {
		if got := podMatters().Delete(tc.ev); got != tc.want {
			t.Errorf("pod deletion event %q wakes %t, want %t", name, got, tc.want)
		}
	}

	reg, err := backend.NewRegistry(trainingv1alpha1.BackendNative, nativejob.NewBackend(testSettings), kubeflowjob.NewBackend(testSettings, nil))
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Backends: reg}
	created := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2)}}
	started := created.DeepCopy()
	started.Status.StartTime = ptr.To(metav1.NewTime(time.Now()))
	started.Status.Active = 2
	ready := started.DeepCopy()
	ready.Status.Ready = ptr.To[int32](2)
	oneDone := ready.DeepCopy()
	oneDone.Status.Active, oneDone.Status.Ready, oneDone.Status.Succeeded = 1, ptr.To[int32](1), 1
	succeeded := oneDone.DeepCopy()
	succeeded.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}
	complete := succeeded.DeepCopy()
	complete.Status.Active, complete.Status.Ready, complete.Status.Succeeded = 0, ptr.To[int32](0), 2
	complete.Status.Conditions = append(complete.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	failing := ready.DeepCopy()
	failing.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}}
	failed := failing.DeepCopy()
	failed.Status.Active, failed.Status.Failed = 0, 2
	failed.Status.Conditions = append(failed.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue})
	jobs := map[string]struct {
		before, after *batchv1.Job
		want          bool
	}{
		"the start time alone":            {before: created, after: started, want: false},
		"every rank ready":                {before: started, after: ready, want: true},
		"a rank ends, the run goes on":    {before: ready, after: oneDone, want: false},
		"the Job meets success":           {before: oneDone, after: succeeded, want: true},
		"a status write changing nothing": {before: ready, after: ready.DeepCopy(), want: false},
		"the Job completes after success": {before: succeeded, after: complete, want: false},
		"the Job decides it failed":       {before: ready, after: failing, want: true},
		"the Job fails after deciding":    {before: failing, after: failed, want: false},
	}
	for name, tc := range jobs {
		if got := r.childMatters().Update(ctrlevent.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after}); got != tc.want {
			t.Errorf("Job update %q wakes %t, want %t", name, got, tc.want)
		}
	}
	// The reconcile that created the child recorded it already.
	if r.childMatters().Create(ctrlevent.CreateEvent{Object: created}) {
		t.Error("the creation of a Job wakes a reconcile")
	}
}
