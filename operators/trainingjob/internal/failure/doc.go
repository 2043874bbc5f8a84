// Package failure classifies why a run of a TrainingJob failed, from the
// truth its pods report rather than from exit codes alone, into
// infrastructure failures worth a new run and user errors that would fail
// again.
package failure
