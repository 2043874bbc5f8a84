package v1alpha1

import "testing"

func TestPodsOfATrainingJob(t *testing.T) {
	ps := func(n int32) *int32 { return &n }
	cases := map[string]struct {
		spec                 TrainingJobSpec
		wantWorkers, wantAll int32
	}{
		"not defaulted":            {spec: TrainingJobSpec{}, wantWorkers: 1, wantAll: 1},
		"workers":                  {spec: TrainingJobSpec{Workers: 4}, wantWorkers: 4, wantAll: 4},
		"with parameter servers":   {spec: TrainingJobSpec{Workers: 3, ParameterServers: ps(2)}, wantWorkers: 3, wantAll: 5},
		"zero parameter servers":   {spec: TrainingJobSpec{Workers: 2, ParameterServers: ps(0)}, wantWorkers: 2, wantAll: 2},
		"undefaulted with servers": {spec: TrainingJobSpec{ParameterServers: ps(1)}, wantWorkers: 1, wantAll: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &TrainingJob{Spec: tc.spec}
			if got := tj.WorkerPods(); got != tc.wantWorkers {
				t.Errorf("WorkerPods() = %d, want %d", got, tc.wantWorkers)
			}
			if got := tj.Pods(); got != tc.wantAll {
				t.Errorf("Pods() = %d, want %d", got, tc.wantAll)
			}
		})
	}
}
