// Package apply writes the children an operator owns, and never an object
// that is not the operator's: Apply converges a child with server-side
// apply under the operator's field manager, only when a field the operator
// sets has drifted; Create writes a child once that must never be written
// again (a Secret holding a generated password or token). It is not the
// only way children are written. Children whose creation is a decision
// recorded elsewhere (a TrainingJob's run, its checkpoint claim) are
// created by their controllers, which check ownership with Check and
// CheckLive and merge-patch only the fields they own on them (a run's queue
// labels and suspend); Secrets whose data an operator changes later (the
// FeatureStore's client configuration and rotated credentials) are updated
// in place.
package apply
