// Package backends turns FeatureStoreBackends and their admin Secrets into
// connection settings for the provisioners.
package backends
