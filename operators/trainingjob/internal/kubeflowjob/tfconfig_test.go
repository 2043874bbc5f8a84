package kubeflowjob

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
)

// TestTFConfigAsTheTrainingOperatorWritesIt pins the TF_CONFIG that
// training-operator v1.8 (pkg/controller.v1/tensorflow, genClusterSpec and
// genTFConfigJSONStr) gives the pod whose is longest: every replica as
// <job>-<type>-<index>.<namespace>.svc:<port>.
func TestTFConfigAsTheTrainingOperatorWritesIt(t *testing.T) {
	tj := newTJ(trainingv1alpha1.FrameworkTensorFlow, 3).mutate(func(s *trainingv1alpha1.TrainingJobSpec) {
		s.ParameterServers = ptr.To[int32](1)
	}).obj()
	want := `{"cluster":{"chief":["mnist-r2-chief-0.team-a.svc:2222"],"ps":["mnist-r2-ps-0.team-a.svc:2222"],` +
		`"worker":["mnist-r2-worker-0.team-a.svc:2222","mnist-r2-worker-1.team-a.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}`
	if got := (tensorflow{}).tfConfig(tj, 2); got != want {
		t.Errorf("TF_CONFIG\n got %s\nwant %s", got, want)
	}
}

// TestTFConfigBeyondWhatLinuxPassesIsRefused: the training-operator lists
// every replica in TF_CONFIG; past Linux's 128 KiB for one environment
// variable the pods could never start, so the spec is refused, as the
// native backend refuses its own.
func TestTFConfigBeyondWhatLinuxPassesIsRefused(t *testing.T) {
	long := func(workers, ps int32) *trainingv1alpha1.TrainingJob {
		tj := newTJ(trainingv1alpha1.FrameworkTensorFlow, workers).mutate(func(s *trainingv1alpha1.TrainingJobSpec) {
			s.ParameterServers = ptr.To(ps)
		}).obj()
		tj.Name, tj.Namespace = strings.Repeat("j", 40), strings.Repeat("n", 63)
		return tj
	}
	b := NewBackend(settings, nil)
	if _, err := b.Build(long(512, 64), 1, nil); err != nil {
		t.Fatalf("512 workers and 64 parameter servers: %v", err)
	}
	_, err := b.Build(long(1024, 64), 1, nil)
	var invalid *backend.InvalidSpecError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "TF_CONFIG would be") ||
		!strings.Contains(err.Error(), "more than Linux passes a program in one environment variable (131072)") || !strings.Contains(err.Error(), "fewer workers") {
		t.Errorf("1024 workers, 64 parameter servers, long names: %v, want TF_CONFIG refused as an invalid spec", err)
	}
}
