// Package network is the NetworkPolicy suite of the platform's e2e tests
// (issue 28), run by make e2e on the kind cluster of make quickstart with its
// policy engine: for each policy the platform creates, a connection from a
// real pod that must succeed and one that must be refused, while the refused
// pod reaches an unguarded server (so the refusal is the policy's).
//
// A Notebook admits the operator's activity prober (the Notebook is Ready
// only once the operator has talked to Jupyter) and the pods its
// spec.access.allowFrom names, and refuses a pod of its namespace that the
// list does not name and a pod of another namespace. The operators' metrics
// ports admit the scraper (the charts' networkPolicy.metricsFrom) and refuse
// other pods; the TrainingJob operator's progress endpoint admits rank 0 of
// a real TrainingJob and refuses another pod of its namespace. The two ranks
// of a real TrainingJob reach each other and the progress endpoint behind
// the operator's rank NetworkPolicy, which refuses a rank of another
// TrainingJob and a pod of another namespace carrying the job's labels.
// With the Notebook operator's egress policy turned on for one test, a
// Notebook's kernel resolves names through kube-dns and reaches the listed
// destination and the managed servers of the FeatureStore it is bound to,
// and is refused by a server the list does not name. A FeatureStore's
// managed PostgreSQL and Redis admit the FeatureStore operator (the store
// becomes Ready) and the pods bound to the store (rank 0 of a TrainingJob, a
// Notebook's kernel), which another store's servers refuse; a pod of the
// namespace that is not bound and a pod of another namespace with the
// binding label are refused. The tests skip on clusters that say they do
// not enforce NetworkPolicy.
package network
