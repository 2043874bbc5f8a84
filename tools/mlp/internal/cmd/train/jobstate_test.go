package train

import (
	"context"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

const refusal = `pods "job-0" is forbidden: violates PodSecurity "restricted:latest": hostPath volumes (volume "data")`

// refused is the state the operator reports when the cluster refuses the
// run's pods; the reason is any the operator chooses.
func refused(st *trainingv1alpha1.TrainingJobStatus) {
	st.Phase, st.Run = trainingv1alpha1.PhasePending, 1
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: trainingv1alpha1.ConditionRunning, Status: metav1.ConditionFalse, Reason: "PodsRefused", Message: refusal})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: commonv1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: "PodsRefused", Message: refusal})
}

// warningEvent records a Warning event on the job, as the operator does.
func warningEvent(ns, name, reason, message string) func(context.Context, client.Client) error {
	return func(ctx context.Context, c client.Client) error {
		var tj trainingv1alpha1.TrainingJob
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
			return err
		}
		now := metav1.Now()
		return c.Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: name + "."},
			InvolvedObject: corev1.ObjectReference{
				Kind: "TrainingJob", APIVersion: trainingv1alpha1.GroupVersion.String(), Namespace: ns, Name: name, UID: tj.UID,
			},
			Type: corev1.EventTypeWarning, Reason: reason, Message: message,
			FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: corev1.EventSource{Component: "trainingjob-operator"},
		})
	}
}

const unschedulable = "Pod job-0 cannot be scheduled: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."

// TestFollowShowsWhyThePodsDoNotRun: while the job is pending, `train wait`
// shows the condition that holds it (reason and the API's message) and the
// job's latest Warning event, and `train describe` shows both too.
func TestFollowShowsWhyThePodsDoNotRun(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	if err := c.Create(context.Background(), clitest.TrainingJob(ns, "job", 1)); err != nil {
		t.Fatal(err)
	}
	out := &clitest.SyncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	opErr := make(chan error, 1)
	go func() {
		opErr <- fakeOperator(ctx, c, out, []step{
			{do: jobStatus(ns, "job", refused), expect: "job: Pending, pods ready 0/1, run 1, restarts 0, PodsRefused: " + refusal + "\n"},
			{do: warningEvent(ns, "job", "PodUnschedulable", unschedulable), expect: "PodsRefused: " + refusal + ", last warning PodUnschedulable: " + unschedulable + "\n"},
			{do: jobStatus(ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
				setCondition(st, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, "ChildRejected")
			}), expect: "restarts 0, ChildRejected: ChildRejected"}, // Stalled comes first.
		})
		cancel()
	}()
	r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) { o.Streams.ErrOut = io.MultiWriter(out, o.Streams.ErrOut) }, "train", "wait", "job")
	if err := <-opErr; err != nil {
		t.Fatalf("%v (exit %d, stderr %q)", err, r.Code, r.Err)
	}
	clitest.SetJobStatus(t, c, ns, "job", func(st *trainingv1alpha1.TrainingJobStatus) {
		meta.RemoveStatusCondition(&st.Conditions, commonv1alpha1.ConditionStalled)
	})
	r = clitest.Run(t, ns, "train", "describe", "job")
	for _, want := range []string{"Waiting on:    PodsRefused: " + refusal + "\n", "Last warning:  PodUnschedulable (", "): " + unschedulable + "\n"} {
		if r.Code != 0 || !strings.Contains(r.Out, want) {
			t.Errorf("describe: exit %d, output lacks %q:\n%s%s", r.Code, want, r.Out, r.Err)
		}
	}
}
