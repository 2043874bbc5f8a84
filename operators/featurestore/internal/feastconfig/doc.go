// Package feastconfig writes Feast's feature_store.yaml for a FeatureStore,
// following a pinned version of Feast's configuration schema.
package feastconfig
