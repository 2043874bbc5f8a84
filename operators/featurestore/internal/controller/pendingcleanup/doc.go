// Package pendingcleanup finishes cleanups that FeatureStores handed off
// when their namespace was deleted while their servers were unreachable.
package pendingcleanup
