// Package kueue is the e2e suite of TrainingJobs queued by the real Kueue
// (issue 26): the umbrella chart installs Kueue from its own chart
// (kueue.enabled, which make e2e sets when E2E_SUITES names kueue) with the
// image built from tools/kueue. A ClusterQueue with cpu and memory quota and
// a LocalQueue admit a TrainingJob within quota, which runs; one beyond
// quota stays Queued with Kueue's explanation; a TrainingJob of a higher
// WorkloadPriorityClass preempts the running one, which goes back to Queued
// (Evicted, not a restart) and is admitted again once the quota is free.
// Notebooks with a queue name are admitted through Kueue's statefulset
// integration: one within quota becomes Ready, one beyond quota keeps its
// pod behind Kueue's scheduling gate until the first is deleted. A GPU-like
// extended resource advertised on the node is in the quota: mlp shows a
// waiting job's place in the queue, a preempted PyTorch training resumes
// from its checkpoint, and an idle GPU Notebook's cull frees the GPU for a
// TrainingJob waiting for it.
// The suite skips on clusters without Kueue's CRDs.
package kueue
