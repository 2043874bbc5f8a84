package v1alpha1

// Condition types of a TrainingJob besides the shared ones in
// apis/common (Succeeded, Failed, Suspended, Reconciling, Stalled).
const (
	// ConditionCreated is True once the Kubeflow job of the current run
	// exists.
	ConditionCreated = "Created"
	// ConditionRunning is True while the Kubeflow job reports Running.
	ConditionRunning = "Running"
	// ConditionFeatureStoresReady is False while a referenced FeatureStore
	// is missing or not Ready; the job waits for it before it starts.
	ConditionFeatureStoresReady = "FeatureStoresReady"
)

// Labels and annotations, prefixed with the API group.
const (
	// LabelJobName on a Kubeflow job and its pods names the TrainingJob.
	LabelJobName = "training.mlplatform.dev/job-name"
	// LabelRun on a Kubeflow job and its pods is the run index.
	LabelRun = "training.mlplatform.dev/run"
)
