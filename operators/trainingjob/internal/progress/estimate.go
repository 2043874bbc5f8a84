package progress

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// paceSamples is how many recent reports the ETA's pace is measured over:
// enough to smooth a slow step or two, few enough to follow a change of
// pace (a resumed job on fewer GPUs, say).
const paceSamples = 10

// sample is a reported step and when it arrived.
type sample struct {
	step int64
	at   time.Time
}

// history is the recent samples of one job, oldest first.
type history []sample

// add records s. A step below the newest means the training started over
// (a new run resumed from an older checkpoint): the old pace no longer
// applies.
func (h history) add(s sample) history {
	if n := len(h); n > 0 && s.step < h[n-1].step {
		h = nil
	}
	h = append(h, s)
	if len(h) > paceSamples {
		h = append(history(nil), h[len(h)-paceSamples:]...)
	}
	return h
}

// Derive turns the newest report, received at `at`, and the job's recent
// samples into status.progress: percent of totalSteps done, rounded down,
// and the time totalSteps will be reached at the pace of the samples. ETA
// stays unset until two samples show the steps advancing, and when that
// pace puts it beyond etaHorizon; a finished training's ETA is its last
// report.
func Derive(rep Report, at time.Time, h history) *trainingv1alpha1.TrainingProgress {
	p := &trainingv1alpha1.TrainingProgress{
		Step:           rep.Step,
		TotalSteps:     rep.TotalSteps,
		Epoch:          rep.Epoch,
		LastReportTime: metav1.NewTime(at),
		Metrics:        formatMetrics(rep.Metrics),
	}
	if rep.TotalSteps <= 0 {
		return p
	}
	p.Percent = ptr.To(int32(min(rep.Step, rep.TotalSteps) * 100 / rep.TotalSteps))
	if rep.Final() {
		p.EstimatedCompletionTime = ptr.To(metav1.NewTime(at))
		return p
	}
	if len(h) < 2 {
		return p
	}
	first, last := h[0], h[len(h)-1]
	steps, elapsed := last.step-first.step, last.at.Sub(first.at)
	if steps <= 0 || elapsed <= 0 {
		return p
	}
	perStep := float64(elapsed) / float64(steps)
	remaining := perStep * float64(rep.TotalSteps-rep.Step)
	if remaining > float64(etaHorizon) {
		return p
	}
	p.EstimatedCompletionTime = ptr.To(metav1.NewTime(at.Add(time.Duration(remaining)).Truncate(time.Second)))
	return p
}

// etaHorizon is the farthest ETA Derive gives. No training runs that long:
// a later estimate says only that the job will not finish at this pace,
// which no ETA says as well. It also keeps the float of the remaining
// nanoseconds within a time.Duration, whose conversion would otherwise
// wrap into a date in the past.
const etaHorizon = 10 * 365 * 24 * time.Hour

// formatMetrics renders the values as the shortest decimal strings that
// read back as the same numbers.
func formatMetrics(m map[string]float64) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for name, v := range m {
		out[name] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return out
}
