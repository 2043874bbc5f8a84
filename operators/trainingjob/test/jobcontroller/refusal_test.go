package jobcontroller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// refused waits until the TrainingJob says that its pods are refused, with
// the API server's words in the message and in a Warning event.
func refused(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob, words string) *trainingv1alpha1.TrainingJob {
	t.Helper()
	got := waitTJ(t, c, tj, "Running=False "+commonv1alpha1.ReasonPodsRefused, func(tj *trainingv1alpha1.TrainingJob) bool {
		r := conditions.Get(tj, trainingv1alpha1.ConditionRunning)
		return r != nil && r.Reason == commonv1alpha1.ReasonPodsRefused
	})
	for _, typ := range []string{trainingv1alpha1.ConditionRunning, commonv1alpha1.ConditionReconciling} {
		if c := conditions.Get(got, typ); c == nil || c.Reason != commonv1alpha1.ReasonPodsRefused || !strings.Contains(c.Message, words) {
			t.Errorf("%s condition %+v does not say %q", typ, c, words)
		}
	}
	e := testenv.WaitForEvent(t, c, got, commonv1alpha1.ReasonPodsRefused)
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, words) {
		t.Errorf("event %s %q does not say %q", e.Type, e.Message, words)
	}
	return got
}

// TestPodSecurityRefusalIsReported runs the real Job controller in a
// namespace that enforces the restricted Pod Security Standard: the API
// server refuses every pod with a hostPath volume, and the Job controller
// says so only in FailedCreate events on the Job.
func TestPodSecurityRefusalIsReported(t *testing.T) {
	c, ns := setup(t)
	nsObj := &corev1.Namespace{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := c.Update(t.Context(), nsObj); err != nil {
		t.Fatal(err)
	}
	tj := newTJ(ns, "hostpath", 2)
	tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{
		Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/data"}}}},
	}
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := refused(t, c, tj, `violates PodSecurity "restricted:latest": restricted volume types (volume "host" uses restricted volume type "hostPath")`)
	if got.Status.Phase != trainingv1alpha1.PhasePending || conditions.IsTrue(got, commonv1alpha1.ConditionStalled) {
		t.Errorf("phase %s conditions %+v", got.Status.Phase, got.Status.Conditions)
	}
}

// TestQuotaRefusalIsReportedAndClears fills a ResourceQuota (acting out
// the resource quota controller's status) so that admission refuses the
// Job controller's pods; once the quota is gone the pods are created and
// the report goes away.
func TestQuotaRefusalIsReportedAndClears(t *testing.T) {
	c, ns := setup(t)
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "compute"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if err := c.Create(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := c.Status().Update(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	tj := newTJ(ns, "quota", 1)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := refused(t, c, tj, "exceeded quota: compute")
	if r := conditions.Get(got, trainingv1alpha1.ConditionRunning); !strings.Contains(r.Message, "(QuotaExceeded)") {
		t.Errorf("Running message %q does not name the cause", r.Message)
	}

	if err := c.Delete(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	waitPods(t, c, ns, "quota-r1", 1)
	waitTJ(t, c, tj, "the refusal cleared once the pod exists", func(tj *trainingv1alpha1.TrainingJob) bool {
		r := conditions.Get(tj, trainingv1alpha1.ConditionRunning)
		return r != nil && r.Reason == "PodsPending"
	})
}
