package follow

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
)

// fieldProgress is where the operator publishes the training's progress.
var fieldProgress = []string{"status", "progress"}

// Progress is the training's own progress as the operator publishes it in
// status.progress. It is read from the unstructured object so that this
// client shows it whether or not its Go types know the field.
type Progress struct {
	Step, Total int64
	Epoch       int64
	Percent     int64
	HasPercent  bool
	ETA         time.Time
	LastReport  time.Time
	Metrics     map[string]string
}

// ReadProgress reads status.progress; zero when there is none.
func ReadProgress(u *unstructured.Unstructured) Progress {
	m, found, err := unstructured.NestedMap(u.Object, fieldProgress...)
	if !found || err != nil {
		return Progress{}
	}
	p := Progress{}
	p.Step, _, _ = unstructured.NestedInt64(m, "step")
	p.Total, _, _ = unstructured.NestedInt64(m, "totalSteps")
	p.Epoch, _, _ = unstructured.NestedInt64(m, "epoch")
	p.Percent, p.HasPercent, _ = unstructured.NestedInt64(m, "percent")
	p.ETA = nestedTime(m, "estimatedCompletionTime")
	p.LastReport = nestedTime(m, "lastReportTime")
	if metrics, ok, _ := unstructured.NestedStringMap(m, "metrics"); ok {
		p.Metrics = metrics
	}
	return p
}

func nestedTime(m map[string]any, field string) time.Time {
	s, ok, _ := unstructured.NestedString(m, field)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// Reported says whether the training reported any progress.
func (p Progress) Reported() bool { return !p.LastReport.IsZero() || p.Step > 0 }

// PercentText is "50%", or "-" when no percent was reported.
func (p Progress) PercentText() string {
	if !p.HasPercent {
		return "-"
	}
	return fmt.Sprintf("%d%%", p.Percent)
}

// Summary is "step 50/100 (50%) epoch 2 ETA 1m30s loss=0.3" with what is known.
func (p Progress) Summary(now time.Time) string {
	if !p.Reported() {
		return ""
	}
	var parts []string
	step := fmt.Sprintf("step %d", p.Step)
	if p.Total > 0 {
		step += fmt.Sprintf("/%d", p.Total)
	}
	if p.HasPercent {
		step += fmt.Sprintf(" (%d%%)", p.Percent)
	}
	parts = append(parts, step)
	if p.Epoch > 0 {
		parts = append(parts, fmt.Sprintf("epoch %d", p.Epoch))
	}
	if eta := p.etaText(now); eta != "" {
		parts = append(parts, "ETA "+eta)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Metrics)) {
		parts = append(parts, k+"="+p.Metrics[k])
	}
	return strings.Join(parts, " ")
}

func (p Progress) etaText(now time.Time) string {
	if p.ETA.IsZero() {
		return ""
	}
	if !p.ETA.After(now) {
		return "now"
	}
	return duration.HumanDuration(p.ETA.Sub(now))
}
