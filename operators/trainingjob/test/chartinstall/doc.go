// Package chartinstall installs the trainingjob-operator chart, with the
// Kubeflow training-operator alongside, into a control plane that has no
// CRDs yet, as a cluster without Kubeflow would be.
package chartinstall
