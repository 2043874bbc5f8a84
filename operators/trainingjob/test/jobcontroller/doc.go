// Package jobcontroller proves, with tests only, that the real Job
// controller of kube-controller-manager runs the native backend's Jobs: it
// creates one pod per rank with the completion index, host name and
// subdomain the environment relies on, and its status drives the
// TrainingJob to its outcome.
package jobcontroller
