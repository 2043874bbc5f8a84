package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The contract between the FeatureStore operator, which publishes a Feast
// client configuration, and the Notebook and TrainingJob operators, which
// mount it into the pods of objects that reference the store.
//
// A FeatureStore publishes status.clientConfig (FeatureStoreClientConfig)
// once its stores are provisioned, and is Ready when every store accepts
// connections. A referrer mounts the Secret as a read-only volume at
// FeatureStoreMountRoot/<FeatureStore name>/, projecting the published key to
// FeatureStoreConfigKey, never with subPath, so that a credential rotation
// reaches running pods without a restart; it sets FeatureStoreEnvVar to the
// configuration file of the first reference, which is where the Feast SDK
// looks by default.
const (
	// FeatureStoreMountRoot holds one folder per referenced FeatureStore.
	FeatureStoreMountRoot = "/etc/mlplatform/featurestores"
	// FeatureStoreConfigKey is the Secret key, and so the file name, of
	// the Feast configuration.
	FeatureStoreConfigKey = "feature_store.yaml"
	// FeatureStoreEnvVar is the Feast SDK's variable for the configuration
	// file path.
	FeatureStoreEnvVar = "FEAST_FS_YAML_FILE_PATH"
	// FeatureStoreDirEnvVar points at FeatureStoreMountRoot, for code that
	// uses several stores.
	FeatureStoreDirEnvVar = "MLPLATFORM_FEATURE_STORES_DIR"
)

// FeatureStoreClientConfig is where a FeatureStore publishes its Feast client
// configuration. It names a Secret in the FeatureStore's namespace; the
// configuration holds credentials and is never stored anywhere else.
type FeatureStoreClientConfig struct {
	// SecretName is the Secret holding the configuration.
	SecretName string `json:"secretName"`
	// Key is the Secret key holding feature_store.yaml.
	Key string `json:"key"`
}

// A referrer's pods carry one binding label per FeatureStore they mount, so
// that the FeatureStore operator's NetworkPolicy can admit exactly them to
// the store's managed servers. The key is
// FeatureStoreBindingLabelPrefix + the store's name, with value
// FeatureStoreBindingLabelValue; a pod bound to several stores carries one
// label each. The referrer removes every other label under the prefix from
// the pods it builds, so none can be had by asking for it in a pod template.
const (
	// FeatureStoreBindingLabelPrefix is the prefix (DNS subdomain and
	// slash) of every binding label.
	FeatureStoreBindingLabelPrefix = "bound.features.mlplatform.dev/"
	// FeatureStoreBindingLabelValue is the value of every binding label.
	FeatureStoreBindingLabelValue = "true"
	// featureStoreBindingHashPrefix starts the name part of the label of a
	// store whose name is longer than a label name may be. Object names
	// never hold '_', so no store name, however chosen, gives the same key
	// as another store's hashed name.
	featureStoreBindingHashPrefix = "sha256_"
)

// FeatureStoreBindingLabel is the label key that binds a pod to the
// FeatureStore named store. A label name holds at most 63 characters: a
// longer store name (a DNS subdomain of up to 253) is replaced by
// "sha256_" and the first 56 hexadecimal digits of its SHA-256.
func FeatureStoreBindingLabel(store string) string {
	if len(store) <= 63 {
		return FeatureStoreBindingLabelPrefix + store
	}
	sum := sha256.Sum256([]byte(store))
	return FeatureStoreBindingLabelPrefix + featureStoreBindingHashPrefix + hex.EncodeToString(sum[:])[:63-len(featureStoreBindingHashPrefix)]
}

// IsFeatureStoreBindingLabel reports whether key is a binding label of any
// store.
func IsFeatureStoreBindingLabel(key string) bool {
	return strings.HasPrefix(key, FeatureStoreBindingLabelPrefix)
}
