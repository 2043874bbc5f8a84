package backend_test

import (
	"errors"
	"testing"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
)

// TestOfKeepsAJobOnTheBackendOfItsChild: a job that an operator older than
// status.backend started records only its child (status.job); after an
// upgrade whose default is another backend it stays on its child's backend
// instead of getting a second child on the default.
func TestOfKeepsAJobOnTheBackendOfItsChild(t *testing.T) {
	s := backend.Settings{OperatorName: "trainingjob-operator"}
	for _, missing := range []map[string]error{nil, {"PyTorchJob": errors.New("no PyTorchJob CRD")}} {
		r, err := backend.NewRegistry(trainingv1alpha1.BackendNative, nativejob.NewBackend(s), kubeflowjob.NewBackend(s, missing))
		if err != nil {
			t.Fatal(err)
		}
		job := func(apiVersion, kind string) *trainingv1alpha1.TrainingJob {
			tj := &trainingv1alpha1.TrainingJob{}
			tj.Name, tj.Spec.Framework, tj.Spec.Workers = "old", trainingv1alpha1.FrameworkPyTorch, 2
			tj.Status.Run = 1
			if kind != "" {
				tj.Status.Job = &trainingv1alpha1.JobReference{APIVersion: apiVersion, Kind: kind, Name: "old-r1"}
			}
			return tj
		}
		cases := []struct {
			name string
			tj   *trainingv1alpha1.TrainingJob
			want trainingv1alpha1.Backend
		}{
			{"kubeflow child, no status.backend", job("kubeflow.org/v1", "PyTorchJob"), trainingv1alpha1.BackendKubeflow},
			{"native child, no status.backend", job("batch/v1", "Job"), trainingv1alpha1.BackendNative},
			{"no child yet", job("", ""), trainingv1alpha1.BackendNative},
			{"a child of no backend's kind", job("example.com/v1", "Unknown"), trainingv1alpha1.BackendNative},
		}
		recorded := job("kubeflow.org/v1", "PyTorchJob")
		recorded.Status.Backend = trainingv1alpha1.BackendNative
		cases = append(cases, struct {
			name string
			tj   *trainingv1alpha1.TrainingJob
			want trainingv1alpha1.Backend
		}{"status.backend wins", recorded, trainingv1alpha1.BackendNative})
		unknownFramework := job("kubeflow.org/v1", "PyTorchJob")
		unknownFramework.Spec.Framework = "hostile"
		cases = append(cases, struct {
			name string
			tj   *trainingv1alpha1.TrainingJob
			want trainingv1alpha1.Backend
		}{"a framework no backend runs (no panic)", unknownFramework, trainingv1alpha1.BackendNative})
		for _, c := range cases {
			if got := r.Of(c.tj); got != c.want {
				t.Errorf("Kubeflow missing=%v, %s: Of = %s, want %s", missing != nil, c.name, got, c.want)
			}
		}
	}
}
