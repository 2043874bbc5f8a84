package backends

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// TestBareJobIsTheNativeJobOfNobody: the baseline runs the pods the native
// backend would run, under the name the tracker matches, owned by nobody
// and outside the operator's caches; it ends when the Job controller
// decides.
func TestBareJobIsTheNativeJobOfNobody(t *testing.T) {
	job, err := bareJob("team", "j00007", settings{workers: 4, backendField: true})
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "j00007-r1" || job.Namespace != "team" || len(job.OwnerReferences) != 0 {
		t.Errorf("Job %s/%s owners %v, want team/j00007-r1 owned by nobody", job.Namespace, job.Name, job.OwnerReferences)
	}
	if *job.Spec.Completions != 4 || *job.Spec.CompletionMode != batchv1.IndexedCompletion || job.Spec.Template.Spec.Subdomain != "trainingjob-ranks" {
		t.Errorf("completions %d mode %s subdomain %q, want the native backend's 4 Indexed ranks", *job.Spec.Completions, *job.Spec.CompletionMode, job.Spec.Template.Spec.Subdomain)
	}
	for _, l := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		if l["app.kubernetes.io/managed-by"] != bareManagedBy || l[trainingv1alpha1.LabelJobName] != "j00007" {
			t.Errorf("labels %v, want managed by %s and the job name", l, bareManagedBy)
		}
	}
	if bareSucceeded(job) || bareFailed(job) {
		t.Error("a new Job counts as ended")
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}
	if !bareSucceeded(job) {
		t.Error("a Job that met its success criteria does not count as succeeded")
	}
}
