package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
)

// progress is the training's own progress as the operator publishes it in
// status.progress. It is read from the unstructured object so that this
// client shows it whether or not its Go types know the field.
type progress struct {
	Step, Total int64
	Epoch       int64
	Percent     int64
	HasPercent  bool
	ETA         time.Time
	LastReport  time.Time
	Metrics     map[string]string
}

func readProgress(u *unstructured.Unstructured) progress {
	m, found, err := unstructured.NestedMap(u.Object, fieldProgress...)
	if !found || err != nil {
		return progress{}
	}
	p := progress{}
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

// reported says whether the training reported any progress.
func (p progress) reported() bool { return !p.LastReport.IsZero() || p.Step > 0 }

func (p progress) percentText() string {
	if !p.HasPercent {
		return "-"
	}
	return fmt.Sprintf("%d%%", p.Percent)
}

// summary is "step 50/100 (50%) epoch 2 ETA 1m30s loss=0.3" with what is known.
func (p progress) summary(now time.Time) string {
	if !p.reported() {
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

func (p progress) etaText(now time.Time) string {
	if p.ETA.IsZero() {
		return ""
	}
	if !p.ETA.After(now) {
		return "now"
	}
	return duration.HumanDuration(p.ETA.Sub(now))
}
