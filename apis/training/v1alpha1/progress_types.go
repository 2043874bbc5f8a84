package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TrainingProgress is the training's own progress, reported by its rank-0
// process to the operator's progress endpoint (see the chart's README) and
// published by the operator at most once per report interval. A job whose
// reporter stopped keeps its last progress; lastReportTime says how old it
// is.
type TrainingProgress struct {
	// Step is the last step the training reported.
	// +kubebuilder:validation:Minimum=0
	Step int64 `json:"step"`

	// TotalSteps is the number of steps the training expects to run; zero
	// when it did not say.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TotalSteps int64 `json:"totalSteps,omitempty"`

	// Epoch the training reported, if it counts epochs.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Epoch int64 `json:"epoch,omitempty"`

	// Percent of totalSteps done, derived by the operator; unset without
	// totalSteps.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent *int32 `json:"percent,omitempty"`

	// EstimatedCompletionTime is when the training will reach totalSteps at
	// the pace of its recent reports, derived by the operator.
	// +optional
	EstimatedCompletionTime *metav1.Time `json:"estimatedCompletionTime,omitempty"`

	// Metrics are a few named values the training reported, such as loss
	// or accuracy, as decimal strings.
	// +kubebuilder:validation:MaxProperties=8
	// +optional
	Metrics map[string]string `json:"metrics,omitempty"`

	// LastReportTime is when the operator received the report shown.
	LastReportTime metav1.Time `json:"lastReportTime"`
}
