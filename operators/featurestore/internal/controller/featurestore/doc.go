// Package featurestore reconciles FeatureStores: it provisions their
// stores, publishes the Feast client configuration and removes what it
// provisioned behind a finalizer.
package featurestore
