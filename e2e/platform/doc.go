// Package platform tests what a platform team relies on across the three
// operators: the charts' escape hatches and the umbrella's globals, health
// as kstatus and Argo CD compute it, unambiguous resource names, API
// documentation and the monitoring rules. Its tests need no cluster (the
// names test starts its own API server), so they run in `make test`.
package platform
