package v1alpha1

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
