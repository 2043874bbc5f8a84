package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
)

// The bounds of a report. MaxMetrics matches the CRD's limit on
// status.progress.metrics.
const (
	MaxBodyBytes   = 4 << 10
	MaxMetrics     = 8
	MaxMetricName  = 63
	MaxStep        = int64(1) << 53
	metricNameExpr = `^[A-Za-z_][A-Za-z0-9_.\-/]*$`
)

var metricName = regexp.MustCompile(metricNameExpr)

// Report is the body a training process posts: its step, the steps it
// expects to run, its epoch and a few named metrics.
type Report struct {
	Step       int64              `json:"step"`
	TotalSteps int64              `json:"totalSteps,omitempty"`
	Epoch      int64              `json:"epoch,omitempty"`
	Metrics    map[string]float64 `json:"metrics,omitempty"`
}

// Final says the training reached its last step.
func (r Report) Final() bool { return r.TotalSteps > 0 && r.Step >= r.TotalSteps }

// ErrInvalid marks a report the caller must fix; its message says what.
var ErrInvalid = errors.New("invalid report")

// Decode reads one JSON report and checks its bounds. The reader should
// already be limited to MaxBodyBytes. A key given twice in one object is
// refused: encoding/json would keep the last silently, so two parsers
// could read one report differently.
func Decode(r io.Reader) (Report, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return Report{}, fmt.Errorf("%w: reading the body: %w", ErrInvalid, err)
	}
	if err := uniqueKeys(body); err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var rep Report
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return Report{}, fmt.Errorf("%w: body is not a JSON report {step, totalSteps, epoch, metrics}: %s", ErrInvalid, jsonProblem(err))
	}
	if dec.More() {
		return Report{}, fmt.Errorf("%w: body holds more than one JSON value", ErrInvalid)
	}
	return rep, rep.Validate()
}

// uniqueKeys walks the JSON tokens of body and fails on an object that
// names a key twice. Syntax errors are left to the decoder, whose message
// says more.
func uniqueKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var open []*jsonFrame
	for tok, err := dec.Token(); err == nil; tok, err = dec.Token() {
		if n := len(open); n > 0 && open[n-1].keys != nil && open[n-1].wantKey {
			if key, ok := tok.(string); ok {
				if open[n-1].keys[key] {
					return fmt.Errorf("key %q appears more than once", truncate(key, MaxMetricName))
				}
				open[n-1].keys[key], open[n-1].wantKey = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			open = append(open, &jsonFrame{keys: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			open = append(open, &jsonFrame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			// The decoder refuses an unmatched delimiter; the guard only
			// keeps the walk safe whatever it returns.
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		}
		// A value ended: the object holding it expects a key next.
		if n := len(open); n > 0 && open[n-1].keys != nil {
			open[n-1].wantKey = true
		}
	}
	return nil
}

// jsonFrame is an open object (with the keys it named so far) or array
// (keys nil) of uniqueKeys' walk.
type jsonFrame struct {
	keys    map[string]bool
	wantKey bool
}

// jsonProblem says what was wrong with the JSON without echoing the input
// beyond the decoder's own short messages.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("field %q must be %s", typeErr.Field, typeErr.Type)
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// Validate checks the report's bounds: non-negative counters below 2^53
// (exact in every JSON implementation), a step not past totalSteps, and at
// most MaxMetrics metrics with short names and finite values.
func (r Report) Validate() error {
	for name, v := range map[string]int64{"step": r.Step, "totalSteps": r.TotalSteps, "epoch": r.Epoch} {
		if v < 0 || v > MaxStep {
			return fmt.Errorf("%w: %s must be between 0 and %d, got %d", ErrInvalid, name, MaxStep, v)
		}
	}
	if r.TotalSteps > 0 && r.Step > r.TotalSteps {
		return fmt.Errorf("%w: step %d is past totalSteps %d", ErrInvalid, r.Step, r.TotalSteps)
	}
	if len(r.Metrics) > MaxMetrics {
		return fmt.Errorf("%w: at most %d metrics, got %d", ErrInvalid, MaxMetrics, len(r.Metrics))
	}
	for name, v := range r.Metrics {
		if len(name) > MaxMetricName || !metricName.MatchString(name) {
			return fmt.Errorf("%w: metric name %q must match %s and be at most %d characters", ErrInvalid, truncate(name, MaxMetricName), metricNameExpr, MaxMetricName)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: metric %q is not a finite number", ErrInvalid, name)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
