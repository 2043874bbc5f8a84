// Package panics is the reconcilers' safety net: a panic in a reconcile is
// recovered and shown on the object as a condition and an event, instead of
// a crash loop or a silent retry behind an unchanged status.
package panics
