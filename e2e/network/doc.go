// Package network is the NetworkPolicy suite of the platform's e2e tests
// (issue 28), run by make e2e on the kind cluster of make quickstart with its
// policy engine: for each policy the platform creates, a connection from a
// real pod that must succeed and one that must be refused. A Notebook admits
// the operator's activity prober (the Notebook is Ready only once the
// operator has talked to Jupyter) and the pods its spec.access.allowFrom
// names, and refuses a pod of its namespace that the list does not name and
// a pod of another namespace. The tests skip on clusters that say they do
// not enforce NetworkPolicy.
package network
