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
	// ConditionCheckpointReady is True once the checkpoint claim exists
	// and offers the access mode the job mounts it with.
	ConditionCheckpointReady = "CheckpointReady"
	// ConditionQueued is True while the run's Kubeflow job waits for Kueue
	// to admit it (again, after an eviction), and False with reason
	// Admitted once Kueue admitted it. Jobs without queueName do not have
	// it. Waiting in a queue is never a failure and never a restart.
	ConditionQueued = "Queued"
	// ConditionRestarting is True while the job waits to start its next
	// run after an infrastructure failure; status.nextRunTime says until
	// when.
	ConditionRestarting = "Restarting"
	// ConditionFinished is True once the job succeeded or failed (its
	// reason says which) and False before: one condition to wait for
	// whatever the outcome, `kubectl wait --for=condition=Finished`.
	ConditionFinished = "Finished"
)

// Labels and annotations, prefixed with the API group.
const (
	// LabelJobName on a Kubeflow job and its pods names the TrainingJob.
	LabelJobName = "training.mlplatform.dev/job-name"
	// LabelRun on a Kubeflow job and its pods is the run index.
	LabelRun = "training.mlplatform.dev/run"
	// LabelKueueQueueName is Kueue's documented label that submits a job
	// to a LocalQueue.
	LabelKueueQueueName = "kueue.x-k8s.io/queue-name"
	// LabelKueuePriorityClass is Kueue's documented label that names a
	// job's WorkloadPriorityClass; on a TrainingJob it reaches each run's
	// job.
	LabelKueuePriorityClass = "kueue.x-k8s.io/priority-class"
)

// The environment contract of training containers with a checkpoint; see
// Checkpoint.
const (
	EnvCheckpointDir = "MLPLATFORM_CHECKPOINT_DIR"
	EnvRun           = "MLPLATFORM_RUN"
	EnvRestartCount  = "MLPLATFORM_RESTART_COUNT"
	EnvResume        = "MLPLATFORM_RESUME"
)

// CheckpointVolume is the name of the checkpoint volume in generated pods;
// the CRD reserves it when a checkpoint is configured.
const CheckpointVolume = "checkpoint"
