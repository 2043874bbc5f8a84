package notebook

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/culling"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/health/healthtest"
)

// kstatusOf is what Helm 4's --wait, Flux and Argo CD's kstatus-based
// checks make of a Notebook: the real library on the object as the API
// server would serve it.
func kstatusOf(t *testing.T, nb *notebooksv1alpha1.Notebook) kstatus.Status {
	t.Helper()
	obj := nb.DeepCopy()
	obj.SetGroupVersionKind(notebooksv1alpha1.GroupVersion.WithKind("Notebook"))
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: m})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

func waitingPod(reason string) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: render.ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}},
	}}}}
}

// TestKstatusOfEveryNotebookState computes the status of a Notebook in
// every state the operator distinguishes, starting from a Notebook that
// was Ready (so stale conditions must go), and asks kstatus what it
// makes of it: a Notebook that is as its user asked is Current (running,
// suspended, culled), one that only its user can fix is Failed, and one on
// its way is InProgress.
func TestKstatusOfEveryNotebookState(t *testing.T) {
	ok := jupyter.Observation{LastActivity: t0, Kernels: 1}
	notAnswering := jupyter.Observation{Err: errors.New("connection refused")}
	quota := &corev1.Event{Reason: "FailedCreate", Message: `pods "nb-0" is forbidden: exceeded quota: compute`}
	unschedulable := corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes",
	}}}}
	table := healthtest.NewTable(t, filepath.Join("..", "..", "..", "..", "..", "charts", "notebook-operator", "files", "crds", "notebooks.mlplatform.dev_notebooks.yaml"))
	for name, tc := range map[string]struct {
		suspend    bool
		scope      scope
		want       kstatus.Status
		wantPhase  notebooksv1alpha1.Phase
		wantReady  metav1.ConditionStatus // "" when Ready must be absent
		deleting   bool
		generation int64 // observed generation lagging behind when set
	}{
		"starting":                        {want: kstatus.InProgressStatus, wantPhase: notebooksv1alpha1.PhasePending, wantReady: metav1.ConditionFalse},
		"running and answering":           {scope: scope{running: true, probe: &ok}, want: kstatus.CurrentStatus, wantPhase: notebooksv1alpha1.PhaseRunning, wantReady: metav1.ConditionTrue},
		"running, Jupyter silent":         {scope: scope{running: true, probe: &notAnswering}, want: kstatus.InProgressStatus, wantPhase: notebooksv1alpha1.PhasePending, wantReady: metav1.ConditionFalse},
		"running, first answer pending":   {scope: scope{running: true, probePending: true}, want: kstatus.InProgressStatus, wantPhase: notebooksv1alpha1.PhasePending, wantReady: metav1.ConditionFalse},
		"running, a newer answer pending": {scope: scope{running: true, probe: &ok, probePending: true}, want: kstatus.CurrentStatus, wantPhase: notebooksv1alpha1.PhaseRunning, wantReady: metav1.ConditionTrue},
		"suspended":                       {suspend: true, want: kstatus.CurrentStatus, wantPhase: notebooksv1alpha1.PhaseSuspended},
		"waiting in its queue":            {scope: scope{replicas: 1, queue: &queueObservation{exists: true}}, want: kstatus.InProgressStatus, wantPhase: notebooksv1alpha1.PhaseQueued, wantReady: metav1.ConditionFalse},
		"culled for idleness":             {scope: scope{culled: culling.ReasonIdle}, want: kstatus.CurrentStatus, wantPhase: notebooksv1alpha1.PhaseCulled},
		"culled at max lifetime":          {scope: scope{culled: culling.ReasonMaxLifetime}, want: kstatus.CurrentStatus, wantPhase: notebooksv1alpha1.PhaseCulled},
		"old workspace going":             {scope: scope{waiting: "Waiting for the previous workspace claim"}, want: kstatus.InProgressStatus, wantPhase: notebooksv1alpha1.PhasePending, wantReady: metav1.ConditionFalse},
		"image pull back-off":             {scope: scope{pods: []corev1.Pod{waitingPod("ImagePullBackOff")}}, want: kstatus.FailedStatus, wantPhase: notebooksv1alpha1.PhaseFailed, wantReady: metav1.ConditionFalse},
		"image pull error":                {scope: scope{pods: []corev1.Pod{waitingPod("ErrImagePull")}}, want: kstatus.FailedStatus, wantPhase: notebooksv1alpha1.PhaseFailed, wantReady: metav1.ConditionFalse},
		"crash loop":                      {scope: scope{pods: []corev1.Pod{waitingPod("CrashLoopBackOff")}}, want: kstatus.FailedStatus, wantPhase: notebooksv1alpha1.PhaseFailed, wantReady: metav1.ConditionFalse},
		"config error":                    {scope: scope{pods: []corev1.Pod{waitingPod("CreateContainerConfigError")}}, want: kstatus.FailedStatus, wantPhase: notebooksv1alpha1.PhaseFailed, wantReady: metav1.ConditionFalse},
		"unschedulable":                   {scope: scope{pods: []corev1.Pod{unschedulable}}, want: kstatus.InProgressStatus, wantPhase: notebooksv1alpha1.PhaseFailed, wantReady: metav1.ConditionFalse},
		"quota full":                      {scope: scope{createFailure: quota}, want: kstatus.InProgressStatus, wantPhase: notebooksv1alpha1.PhaseFailed, wantReady: metav1.ConditionFalse},
		"invalid spec":                    {scope: scope{stalled: commonv1alpha1.ReasonInvalidSpec, stalledMsg: "bad"}, want: kstatus.FailedStatus, wantPhase: notebooksv1alpha1.PhaseFailed, wantReady: metav1.ConditionFalse},
		"child rejected":                  {scope: scope{stalled: commonv1alpha1.ReasonChildRejected, stalledMsg: "422"}, want: kstatus.FailedStatus, wantPhase: notebooksv1alpha1.PhaseFailed, wantReady: metav1.ConditionFalse},
		"suspended, spec unseen":          {suspend: true, generation: 3, want: kstatus.InProgressStatus, wantPhase: notebooksv1alpha1.PhaseSuspended},
		"deleting while suspended":        {suspend: true, deleting: true, want: kstatus.TerminatingStatus, wantPhase: notebooksv1alpha1.PhaseSuspended},
	} {
		t.Run(name, func(t *testing.T) {
			nb := newNotebook("team", "nb")
			nb.TypeMeta = metav1.TypeMeta{APIVersion: notebooksv1alpha1.GroupVersion.String(), Kind: "Notebook"}
			nb.Generation = 2
			nb.Spec.Suspend = tc.suspend
			conditions.MarkReady(nb, notebooksv1alpha1.ReasonRunning, "was running")
			s := tc.scope
			s.nb = nb
			s.input = render.Input{Notebook: nb, Config: testConfig()}
			s.now = t0.Add(time.Hour)
			computeStatus(&s)
			nb.Status.ObservedGeneration = nb.Generation // as the Runner stamps it
			if tc.generation != 0 {
				nb.Generation = tc.generation
			}
			if tc.deleting {
				nb.DeletionTimestamp = &metav1.Time{Time: t0}
			}

			if got := kstatusOf(t, nb); got != tc.want {
				t.Errorf("kstatus = %s, want %s; conditions %+v", got, tc.want, nb.Status.Conditions)
			}
			if nb.Status.Phase != tc.wantPhase {
				t.Errorf("phase = %s, want %s", nb.Status.Phase, tc.wantPhase)
			}
			ready := conditions.Get(nb, commonv1alpha1.ConditionReady)
			switch {
			case tc.wantReady == "" && ready != nil:
				t.Errorf("Ready = %+v, want none", ready)
			case tc.wantReady != "" && (ready == nil || ready.Status != tc.wantReady):
				t.Errorf("Ready = %+v, want %s", ready, tc.wantReady)
			}
			table.Add(t, name, nb)
		})
	}
	table.Golden(t, filepath.Join("testdata", "health-table.md"))
}
