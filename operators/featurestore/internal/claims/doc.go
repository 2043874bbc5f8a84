// Package claims holds what the FeatureStore, FeatureStoreBackend and
// pending-cleanup controllers share: the labels, keys and index that tie
// stores, backends and handed-off cleanups together, the claims on a Redis
// backend's key spaces, and the cleanup-failure metric.
package claims
