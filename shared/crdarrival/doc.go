// Package crdarrival starts a controller's watches of kinds whose CRDs are
// installed after the operator started, without a restart.
package crdarrival
