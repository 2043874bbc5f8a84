// Package featurestorebackend reconciles FeatureStoreBackends: it proves
// the admin credentials work with a real connection, and keeps a deleted
// backend until no FeatureStore needs it for its cleanup.
package featurestorebackend
