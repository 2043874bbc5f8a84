package kubeflowjob

import (
	"errors"
	"strings"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
)

// TestValidateRefusesWhatNothingWouldAdmit: Kueue v0.17's kubeflow.org/mpijob
// integration manages the MPI Operator's kubeflow.org/v2beta1 MPIJob, not
// the training-operator's kubeflow.org/v1 MPIJob this backend creates, so
// a queued MPI job would wait forever; the job is refused as invalid,
// with the remedy, before any child exists.
func TestValidateRefusesWhatNothingWouldAdmit(t *testing.T) {
	b := NewBackend(settings, nil)
	cases := map[string]struct {
		tj      *trainingv1alpha1.TrainingJob
		wantErr string
	}{
		"mpi without a queue":    {tj: newTJ(trainingv1alpha1.FrameworkMPI, 2).obj()},
		"pytorch with a queue":   {tj: newTJ(trainingv1alpha1.FrameworkPyTorch, 2).queue("q").obj()},
		"mpi with a queue":       {tj: newTJ(trainingv1alpha1.FrameworkMPI, 2).queue("q").obj(), wantErr: "use backend: native"},
		"jax, which has no kind": {tj: newTJ(trainingv1alpha1.FrameworkJAX, 2).obj(), wantErr: "use backend: native"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := b.Validate(tc.tj)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var invalid *backend.InvalidSpecError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate: %v, want an InvalidSpecError saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestAvailabilityIsPerKind: a cluster that serves PyTorchJob but not the
// training-operator's MPIJob runs PyTorch jobs; only MPI jobs wait, until
// their CRD appears.
func TestAvailabilityIsPerKind(t *testing.T) {
	b := NewBackend(settings, map[string]error{"MPIJob": errors.New("no MPIJob CRD")})
	pytorch, mpi := newTJ(trainingv1alpha1.FrameworkPyTorch, 2).obj(), newTJ(trainingv1alpha1.FrameworkMPI, 2).obj()
	if err := b.Available(pytorch); err != nil {
		t.Errorf("pytorch: %v, want available", err)
	}
	if err := b.Available(mpi); err == nil {
		t.Error("mpi: available without its CRD")
	}
	if n, m := len(b.Served()), len(b.Missing()); n != len(Frameworks())-1 || m != 1 {
		t.Errorf("%d kinds served and %d missing, want all but MPIJob and MPIJob", n, m)
	}
	b.MarkInstalled("MPIJob")
	if err := b.Available(mpi); err != nil || len(b.Missing()) != 0 {
		t.Errorf("after MPIJob's CRD appeared: %v, missing %d", err, len(b.Missing()))
	}
}

// TestAKindWhoseCRDGoesAwayIsMissingUntilItComesBack: the PyTorchJob CRD
// deleted while the operator runs makes PyTorch jobs wait with the reason
// given, and only them; its return makes them run again. Marks come from
// the CRD watch while reconciles read, so they are safe together.
func TestAKindWhoseCRDGoesAwayIsMissingUntilItComesBack(t *testing.T) {
	b := NewBackend(settings, nil)
	pytorch, tf := newTJ(trainingv1alpha1.FrameworkPyTorch, 2).obj(), newTJ(trainingv1alpha1.FrameworkTensorFlow, 2).obj()
	gone := errors.New("the PyTorchJob CRD is no longer served")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_ = b.Available(pytorch)
			_ = b.Served()
		}
	}()
	b.MarkMissing("PyTorchJob", gone)
	<-done
	if err := b.Available(pytorch); !errors.Is(err, gone) {
		t.Errorf("pytorch after its CRD went: %v, want %v", err, gone)
	}
	if err := b.Available(tf); err != nil {
		t.Errorf("tensorflow, whose CRD stays: %v, want available", err)
	}
	if m := b.Missing(); len(m) != 1 {
		t.Errorf("missing %d kinds, want PyTorchJob alone", len(m))
	} else if _, ok := m[0].(*kubeflowv1.PyTorchJob); !ok {
		t.Errorf("missing %T, want PyTorchJob", m[0])
	}
	b.MarkInstalled("PyTorchJob")
	if err := b.Available(pytorch); err != nil || len(b.Missing()) != 0 {
		t.Errorf("after the CRD came back: %v, missing %d", err, len(b.Missing()))
	}
}
