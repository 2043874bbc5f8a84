// Package validation proves the TrainingJob CRD's schema, defaults and CEL
// rules on a real API server; it holds tests only.
package validation
