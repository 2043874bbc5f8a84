package backends

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
	"github.com/ml-platform/ml-platform/shared/accelerator"
)

// backendBare is the baseline: the Indexed Job the native backend would
// create, created by the benchmark itself, with no TrainingJob, no
// operator and no Service. Whatever a native job costs beyond it is the
// operator's.
const backendBare = "bare"

// bareManagedBy labels the baseline's Jobs and pods. It differs from the
// operator's name, so they stay out of the operator's label-restricted
// caches, as any Job the operator does not own would.
const bareManagedBy = "bench-bare"

// bareJob is the Job of run 1 of the TrainingJob the other backends get,
// built by the native backend's own code with the operator's defaults
// (so the pods are the same, down to the environment and the subdomain),
// without an owner. Its name is the native Job's, <name>-r1, so that the
// tracker matches its pods by the same rule.
func bareJob(namespace, name string, s settings) (*batchv1.Job, error) {
	u := trainingJob(namespace, name, s, string(trainingv1alpha1.BackendNative))
	tj := &trainingv1alpha1.TrainingJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, tj); err != nil {
		return nil, err
	}
	tj.Spec.Backend = trainingv1alpha1.BackendNative
	be := nativejob.NewBackend(backend.Settings{
		OperatorName:     bareManagedBy,
		Catalog:          accelerator.Default(),
		SharedMemorySize: resource.MustParse("1Gi"),
		RunAsUser:        1000,
	})
	obj, err := be.Build(tj, 1, nil)
	if err != nil {
		return nil, err
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, fmt.Errorf("the native backend built a %T, not a Job", obj)
	}
	return job, nil
}

// submission is what the benchmark creates for one job of a backend: a
// TrainingJob, or for the baseline the bare Job.
func submission(namespace, name string, s settings, backendName string) (client.Object, error) {
	if backendName == backendBare {
		return bareJob(namespace, name, s)
	}
	return trainingJob(namespace, name, s, backendName), nil
}

// isBare is whether a backend list entry is the baseline, which needs
// neither the CRD's spec.backend nor an operator.
func isBare(backendName string) bool { return backendName == backendBare }

// bareSucceeded is when the tracker counts a bare Job as succeeded: at the
// Job controller's decision (SuccessCriteriaMet), which is also when the
// native backend records Succeeded, or at Complete on a cluster that
// writes only that.
func bareSucceeded(job *batchv1.Job) bool {
	if job.Labels[trainingv1alpha1.LabelJobName] == "" || job.Labels["app.kubernetes.io/managed-by"] != bareManagedBy {
		return false
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobSuccessCriteriaMet || c.Type == batchv1.JobComplete) && c.Status == "True" {
			return true
		}
	}
	return false
}

// bareFailed is a bare Job the Job controller failed.
func bareFailed(job *batchv1.Job) bool {
	if job.Labels["app.kubernetes.io/managed-by"] != bareManagedBy {
		return false
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobFailureTarget || c.Type == batchv1.JobFailed) && c.Status == "True" {
			return true
		}
	}
	return false
}
