package progress

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

func TestDerivePercentAndETA(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ts := func(s int) *metav1.Time { return ptr.To(metav1.NewTime(at(s))) }
	for name, tc := range map[string]struct {
		samples []sample
		rep     Report
		want    *trainingv1alpha1.TrainingProgress
	}{
		"no total: step and metrics only": {
			samples: []sample{{10, at(0)}},
			rep:     Report{Step: 10, Epoch: 2, Metrics: map[string]float64{"loss": 0.25}},
			want:    &trainingv1alpha1.TrainingProgress{Step: 10, Epoch: 2, Metrics: map[string]string{"loss": "0.25"}, LastReportTime: metav1.NewTime(at(0))},
		},
		"one sample: percent, no pace yet": {
			samples: []sample{{5, at(0)}},
			rep:     Report{Step: 5, TotalSteps: 20},
			want:    &trainingv1alpha1.TrainingProgress{Step: 5, TotalSteps: 20, Percent: ptr.To[int32](25), LastReportTime: metav1.NewTime(at(0))},
		},
		"steady pace: 10 steps per 20 s, 80 steps left": {
			samples: []sample{{10, at(0)}, {15, at(10)}, {20, at(20)}},
			rep:     Report{Step: 20, TotalSteps: 100},
			want:    &trainingv1alpha1.TrainingProgress{Step: 20, TotalSteps: 100, Percent: ptr.To[int32](20), EstimatedCompletionTime: ts(20 + 160), LastReportTime: metav1.NewTime(at(20))},
		},
		"percent rounds down": {
			samples: []sample{{2, at(0)}},
			rep:     Report{Step: 2, TotalSteps: 3},
			want:    &trainingv1alpha1.TrainingProgress{Step: 2, TotalSteps: 3, Percent: ptr.To[int32](66), LastReportTime: metav1.NewTime(at(0))},
		},
		"final: 100 percent, completed at the report": {
			samples: []sample{{10, at(0)}, {20, at(30)}},
			rep:     Report{Step: 20, TotalSteps: 20},
			want:    &trainingv1alpha1.TrainingProgress{Step: 20, TotalSteps: 20, Percent: ptr.To[int32](100), EstimatedCompletionTime: ts(30), LastReportTime: metav1.NewTime(at(30))},
		},
		"a pace that would end centuries from now: no ETA": {
			// One step an hour, 2^40 steps: the remaining time overflows
			// a time.Duration, and used to wrap into a date in the past.
			samples: []sample{{1, at(0)}, {2, at(3600)}},
			rep:     Report{Step: 2, TotalSteps: 1 << 40},
			want:    &trainingv1alpha1.TrainingProgress{Step: 2, TotalSteps: 1 << 40, Percent: ptr.To[int32](0), LastReportTime: metav1.NewTime(at(3600))},
		},
		"no advance: no ETA": {
			samples: []sample{{7, at(0)}, {7, at(30)}},
			rep:     Report{Step: 7, TotalSteps: 10},
			want:    &trainingv1alpha1.TrainingProgress{Step: 7, TotalSteps: 10, Percent: ptr.To[int32](70), LastReportTime: metav1.NewTime(at(30))},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var h history
			for _, s := range tc.samples {
				h = h.add(s)
			}
			got := Derive(tc.rep, tc.samples[len(tc.samples)-1].at, h)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Derive (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHistoryRestartsWhenStepGoesBack(t *testing.T) {
	t0 := time.Now()
	var h history
	for i := range 15 {
		h = h.add(sample{step: int64(i), at: t0.Add(time.Duration(i) * time.Second)})
	}
	if len(h) != paceSamples || h[0].step != 5 {
		t.Fatalf("history keeps the last %d samples, got %d starting at step %d", paceSamples, len(h), h[0].step)
	}
	h = h.add(sample{step: 3, at: t0.Add(time.Minute)})
	if len(h) != 1 || h[0].step != 3 {
		t.Errorf("a step below the newest (a resumed run) starts the pace over, got %v", h)
	}
}

func TestValidateReport(t *testing.T) {
	many := map[string]float64{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		many[n] = 1
	}
	for name, tc := range map[string]struct {
		body    string
		wantErr string
	}{
		"valid":                {body: `{"step":3,"totalSteps":10,"epoch":1,"metrics":{"loss":0.5,"val/acc":0.9}}`},
		"step only":            {body: `{"step":0}`},
		"negative step":        {body: `{"step":-1}`, wantErr: "step must be between 0"},
		"past total":           {body: `{"step":11,"totalSteps":10}`, wantErr: "past totalSteps"},
		"fractional step":      {body: `{"step":1.5}`, wantErr: `field "step" must be int64`},
		"huge step":            {body: `{"step":9007199254740993}`, wantErr: "step must be between 0"},
		"unknown field":        {body: `{"step":1,"rank":0}`, wantErr: "unknown field"},
		"not JSON":             {body: `step=1`, wantErr: "not a JSON report"},
		"two values":           {body: `{"step":1}{"step":2}`, wantErr: "more than one JSON value"},
		"metric not a number":  {body: `{"step":1,"metrics":{"loss":"low"}}`, wantErr: `must be float64`},
		"metric out of range":  {body: `{"step":1,"metrics":{"loss":1e999}}`, wantErr: "not a JSON report"},
		"metric name too long": {body: `{"step":1,"metrics":{"` + strings.Repeat("a", 64) + `":1}}`, wantErr: "metric name"},
		"metric name bad":      {body: `{"step":1,"metrics":{"lo ss":1}}`, wantErr: "metric name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(stringsReader(tc.body))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			if err == nil || !contains(err.Error(), tc.wantErr) {
				t.Errorf("Decode error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if err := (Report{Step: 1, Metrics: many}).Validate(); err == nil || !contains(err.Error(), "at most 8 metrics") {
		t.Errorf("nine metrics: %v", err)
	}
}
