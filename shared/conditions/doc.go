// Package conditions sets metav1.Conditions on ml-platform objects with
// observedGeneration stamped, and keeps the kstatus conditions consistent.
package conditions
