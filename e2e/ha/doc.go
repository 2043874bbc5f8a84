// Package ha is the high-availability e2e suite (issue 15, suite 4): every
// operator runs with two replicas, the leaders are deleted during a burst of
// TrainingJobs and Notebooks, and the suite checks that everything converges
// with no child created twice and reports each operator's handover time.
// It skips without ML_PLATFORM_E2E=1.
package ha
