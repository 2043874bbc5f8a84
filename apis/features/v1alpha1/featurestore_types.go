package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// AnnotationRotateCredentials is an annotation that, set to any new value,
// makes the operator issue new credentials for every store of the FeatureStore. The old ones
// keep working for the operator's grace period, so clients that read the
// mounted configuration again pick up the new ones without an outage.
const AnnotationRotateCredentials = "features.mlplatform.dev/rotate-credentials"

// Condition types of a FeatureStore besides the common ones. Each is True
// only after a real connection as the store's own user succeeded.
const (
	ConditionOnlineStoreReady  = "OnlineStoreReady"
	ConditionOfflineStoreReady = "OfflineStoreReady"
	ConditionRegistryReady     = "RegistryReady"
)

// Condition reasons of a FeatureStore.
const (
	// ReasonConflict: a database or user with the store's name exists on
	// the server without the FeatureStore's ownership marker, or another
	// store's project makes keys indistinguishable. Nothing is changed. (A
	// Kubernetes object of a child's name that is not the store's is
	// commonv1alpha1.ReasonNameTaken, as for every kind.)
	ReasonConflict = "Conflict"
	// ReasonServerUnavailable: the database server did not answer.
	ReasonServerUnavailable = "ServerUnavailable"
	// ReasonBackendMismatch: the named backend is of the wrong kind.
	ReasonBackendMismatch = "BackendMismatch"
	// ReasonWaitingForServer: a managed server is not running yet.
	ReasonWaitingForServer = "WaitingForServer"
)

// FeatureStoreSpec is a tenant's request for a Feast feature store.
//
// +kubebuilder:validation:XValidation:rule="has(self.onlineStore.backend) != has(self.onlineStore.managed)",message="spec.onlineStore: set exactly one of backend (a shared Redis FeatureStoreBackend) and managed (a dedicated Redis in this namespace)"
// +kubebuilder:validation:XValidation:rule="has(self.offlineStore.backend) != has(self.offlineStore.managed)",message="spec.offlineStore: set exactly one of backend (a shared PostgreSQL FeatureStoreBackend) and managed (a dedicated PostgreSQL in this namespace)"
// +kubebuilder:validation:XValidation:rule="has(self.registry.backend) != has(self.registry.managed)",message="spec.registry: set exactly one of backend (a shared PostgreSQL FeatureStoreBackend) and managed (a dedicated PostgreSQL in this namespace)"
// +kubebuilder:validation:XValidation:rule="has(self.onlineStore.backend) == has(oldSelf.onlineStore.backend) && (!has(self.onlineStore.backend) || self.onlineStore.backend == oldSelf.onlineStore.backend)",message="spec.onlineStore: the backend and the choice between backend and managed cannot change, because the data lives there; create a new FeatureStore instead"
// +kubebuilder:validation:XValidation:rule="has(self.offlineStore.backend) == has(oldSelf.offlineStore.backend) && (!has(self.offlineStore.backend) || self.offlineStore.backend == oldSelf.offlineStore.backend)",message="spec.offlineStore: the backend and the choice between backend and managed cannot change, because the data lives there; create a new FeatureStore instead"
// +kubebuilder:validation:XValidation:rule="has(self.registry.backend) == has(oldSelf.registry.backend) && (!has(self.registry.backend) || self.registry.backend == oldSelf.registry.backend)",message="spec.registry: the backend and the choice between backend and managed cannot change, because the data lives there; create a new FeatureStore instead"
type FeatureStoreSpec struct {
	// Project is the Feast project name. Feast appends it to every online
	// store key, so two FeatureStores on one Redis backend may not have
	// projects where one ends with the other (sales and presales): the
	// later one reports a Conflict.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.project is immutable: the stores' data is keyed by it"
	Project string `json:"project"`

	// OnlineStore is the Redis the Feast online store uses.
	OnlineStore StoreSource `json:"onlineStore"`

	// OfflineStore is the PostgreSQL the Feast offline store uses.
	OfflineStore StoreSource `json:"offlineStore"`

	// Registry is the PostgreSQL that holds the Feast registry.
	Registry StoreSource `json:"registry"`

	// DeletionPolicy says what happens to the provisioned databases, roles,
	// users, keys and volumes when the FeatureStore is deleted.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy commonv1alpha1.DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// StoreSource says where one store lives: provisioned in a shared server
// (Backend) or in a dedicated server in the FeatureStore's namespace
// (Managed).
type StoreSource struct {
	// Backend names a FeatureStoreBackend of the right kind: Redis for the
	// online store, PostgreSQL for the offline store and the registry.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Backend string `json:"backend,omitempty"`

	// Managed runs a dedicated server as a StatefulSet in the namespace.
	// The offline store and the registry share one managed PostgreSQL.
	// +optional
	Managed *ManagedServer `json:"managed,omitempty"`
}

// ManagedServer sizes a dedicated server.
//
// +kubebuilder:validation:XValidation:rule="!has(self.storage) || quantity(string(self.storage)).isGreaterThan(quantity('0'))",message="storage must be a positive quantity, such as 1Gi"
type ManagedServer struct {
	// Storage is the size of the server's volume.
	// +kubebuilder:default="1Gi"
	// +optional
	Storage *resource.Quantity `json:"storage,omitempty"`

	// StorageClassName of the volume; empty means the cluster default.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Resources of the server container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// FeatureStoreStatus is what the operator provisioned and observed.
type FeatureStoreStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: OnlineStoreReady, OfflineStoreReady, RegistryReady, Ready,
	// Reconciling, Stalled and CleanupFailed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ClientConfig names the Secret holding the Feast client configuration
	// (feature_store.yaml), for Notebooks and TrainingJobs to mount.
	// +optional
	ClientConfig *commonv1alpha1.FeatureStoreClientConfig `json:"clientConfig,omitempty"`

	// OnlineStore is where the online store was provisioned.
	// +optional
	OnlineStore *ProvisionedStore `json:"onlineStore,omitempty"`

	// OfflineStore is where the offline store was provisioned.
	// +optional
	OfflineStore *ProvisionedStore `json:"offlineStore,omitempty"`

	// Registry is where the registry was provisioned.
	// +optional
	Registry *ProvisionedStore `json:"registry,omitempty"`

	// Provisioning records, for each store in a shared server, the
	// FeatureStoreBackend on which the operator may have created the
	// store's database, roles or user. The operator writes a store's entry
	// before its first request to create anything on that server, and
	// never removes it while the FeatureStore exists, so deleting the
	// FeatureStore cleans up exactly the recorded stores: none recorded
	// means nothing was ever created, and the deletion finishes at once.
	// FeatureStores provisioned by an operator older than this field get
	// it on their next reconcile, inferred from the rest of their status.
	// +optional
	Provisioning *ProvisioningRecord `json:"provisioning,omitempty"`
}

// ProvisioningRecord names the backends on which a FeatureStore's stores
// may exist. An empty name means the operator never tried to create that
// store in a shared server.
type ProvisioningRecord struct {
	// OnlineStoreBackend is the Redis backend of the online store.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	OnlineStoreBackend string `json:"onlineStoreBackend,omitempty"`
	// OfflineStoreBackend is the PostgreSQL backend of the offline store.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	OfflineStoreBackend string `json:"offlineStoreBackend,omitempty"`
	// RegistryBackend is the PostgreSQL backend of the registry.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RegistryBackend string `json:"registryBackend,omitempty"`
}

// ProvisionedStore names what the operator provisioned for one store. It
// never holds credentials.
type ProvisionedStore struct {
	// Endpoint is host:port of the server.
	Endpoint string `json:"endpoint"`
	// Database is the PostgreSQL database; empty for Redis.
	// +optional
	Database string `json:"database,omitempty"`
	// User is the role or ACL user the store's clients log in as.
	// +optional
	User string `json:"user,omitempty"`
}

// FeatureStore is a Feast feature store: an online store, an offline store
// and a registry, provisioned for the tenant, with a client configuration
// that Notebooks and TrainingJobs mount.
//
// The name is checked here because the operator derives its children's
// names and labels from it: every child carries it as a label value (at
// most 63 characters), and managed servers are StatefulSets and Services
// named <name>-postgres and <name>-redis, which must be DNS-1035 labels
// and leave the StatefulSet controller room for its revision label (52).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=mlplatform,shortName=mlfs
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it is the value of the label features.mlplatform.dev/featurestore on every object the operator creates for the FeatureStore"
// +kubebuilder:validation:XValidation:rule="!(has(self.spec.onlineStore.managed) || has(self.spec.offlineStore.managed) || has(self.spec.registry.managed)) || (size(self.metadata.name) <= 43 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$'))",message="a FeatureStore with a managed server needs a name of at most 43 characters made of lowercase letters, digits and '-', starting with a letter: its servers are StatefulSets and Services named <name>-postgres and <name>-redis"
// +kubebuilder:printcolumn:name="Project",type=string,JSONPath=`.spec.project`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Online",type=string,JSONPath=`.status.onlineStore.endpoint`,priority=1,description="Endpoint of the online store"
// +kubebuilder:printcolumn:name="Offline",type=string,JSONPath=`.status.offlineStore.endpoint`,priority=1,description="Endpoint of the offline store"
// +kubebuilder:printcolumn:name="Registry",type=string,JSONPath=`.status.registry.endpoint`,priority=1,description="Endpoint of the registry"
type FeatureStore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FeatureStoreSpec   `json:"spec"`
	Status FeatureStoreStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (f *FeatureStore) GetConditions() []metav1.Condition { return f.Status.Conditions }

// SetConditions replaces the status conditions.
func (f *FeatureStore) SetConditions(c []metav1.Condition) { f.Status.Conditions = c }

// FeatureStoreList is a list of FeatureStores.
//
// +kubebuilder:object:root=true
type FeatureStoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FeatureStore `json:"items"`
}
