// Package cleanup removes what a FeatureStore provisioned in shared
// servers. A Plan holds everything the removal needs and no secret, so it
// can be recorded outside the FeatureStore's namespace when that namespace
// goes before the servers are reachable.
package cleanup
