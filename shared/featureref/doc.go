// Package featureref resolves a Notebook's or TrainingJob's FeatureStore
// references and mounts the published Feast client configurations into pods.
package featureref
