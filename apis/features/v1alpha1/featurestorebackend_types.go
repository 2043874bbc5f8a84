package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a FeatureStoreBackend besides Ready, Reconciling and
// Stalled.
const (
	// ConditionDeletionBlocked is True while a deleted backend is kept
	// because FeatureStores, or cleanups handed off by deleted ones, still
	// need it to remove what they provisioned; the message names them.
	ConditionDeletionBlocked = "DeletionBlocked"
)

// Condition reasons of a FeatureStoreBackend.
const (
	// ReasonAdminSecretNotFound: the admin Secret does not exist in the
	// operator's namespace (yet). Creating it resumes the backend.
	ReasonAdminSecretNotFound = "AdminSecretNotFound"
	// ReasonAdminSecretInvalid: the admin Secret lacks the username or
	// password key.
	ReasonAdminSecretInvalid = "AdminSecretInvalid"
	// ReasonAuthenticationFailed: the server refused the admin credentials.
	ReasonAuthenticationFailed = "AuthenticationFailed"
	// ReasonInsufficientPrivileges: the admin logged in but lacks a
	// privilege the operator needs.
	ReasonInsufficientPrivileges = "InsufficientPrivileges"
	// ReasonInUse: FeatureStores or handed-off cleanups still use the
	// backend.
	ReasonInUse = "InUse"
	// ReasonUnverifiableTLS: the PostgreSQL backend's sslMode (verify-ca,
	// verify-full) has clients verify the server's certificate, but no CA
	// certificate can be given to the stores' Feast clients, which would
	// fail to connect. Also the reason of a FeatureStore on such a backend.
	ReasonUnverifiableTLS = "UnverifiableTLS"
)

// FeatureStoreBackendSpec names one shared database server. Exactly one of
// PostgreSQL and Redis is set, and which one never changes.
//
// +kubebuilder:validation:XValidation:rule="has(self.postgresql) != has(self.redis)",message="set exactly one of spec.postgresql (for offline stores and registries) and spec.redis (for online stores)"
// +kubebuilder:validation:XValidation:rule="has(self.postgresql) == has(oldSelf.postgresql)",message="a FeatureStoreBackend cannot switch between PostgreSQL and Redis; register a new backend instead"
type FeatureStoreBackendSpec struct {
	// PostgreSQL is a PostgreSQL server (15 or later) that hosts offline
	// stores and registries: one database and role per store.
	// +optional
	PostgreSQL *PostgreSQLBackend `json:"postgresql,omitempty"`

	// Redis is a Redis server (7.0 or later) that hosts online stores: one
	// ACL user per store, limited to that store's keys. The server must be
	// dedicated to FeatureStores, because deleting a store removes every
	// hash key that ends in its project name.
	// +optional
	Redis *RedisBackend `json:"redis,omitempty"`
}

// PostgreSQLBackend is how the operator and the stores reach a PostgreSQL
// server.
//
// The admin role needs LOGIN, CREATEDB and CREATEROLE, and must be able to
// grant itself membership of the roles it creates (automatic from
// PostgreSQL 16; on 15 CREATEROLE allows it). It must not be a superuser:
// the operator needs no more than these privileges, and a tenant's
// credentials are never derived from the admin's.
type PostgreSQLBackend struct {
	// Host name or IPv4 address of the server, as stores reach it. Only
	// letters, digits, dots and dashes are accepted: the host goes into
	// connection strings, where a comma, a space or an equals sign would
	// add options. An IPv6 address is refused: Feast's Redis connection
	// string splits host and port at ':', so no form of it reaches the
	// server; give the server a DNS name instead.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.-]+$`
	// +kubebuilder:validation:XValidation:rule="!self.contains(':') && !self.contains('[')",message="an IPv6 address is not supported (Feast cannot connect to one): use a DNS name that resolves to it"
	Host string `json:"host"`

	// Port of the server.
	// +kubebuilder:default=5432
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// AdminDatabase is the database the operator connects to as admin.
	// +kubebuilder:default=postgres
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	AdminDatabase string `json:"adminDatabase,omitempty"`

	// SSLMode for every connection, the operator's and the stores'.
	// verify-ca and verify-full are not usable yet: the stores' Feast
	// clients would need a CA certificate to verify the server against,
	// which the operator cannot give them, so such a backend is not Ready
	// (reason UnverifiableTLS) and no store is provisioned on it. require
	// encrypts without verifying the server.
	// +kubebuilder:default=require
	// +kubebuilder:validation:Enum=disable;require;verify-ca;verify-full
	// +optional
	SSLMode string `json:"sslMode,omitempty"`

	// AdminSecret holds the admin role's credentials. It lives in the
	// operator's namespace, where tenants have no access.
	AdminSecret AdminSecretReference `json:"adminSecret"`
}

// RedisBackend is how the operator and the stores reach a Redis server.
//
// The admin user needs the ACL commands (ACL SETUSER, DELUSER, GETUSER,
// LIST, SAVE), SCAN, TYPE and UNLINK on every key: in practice +@all ~*.
type RedisBackend struct {
	// Host name or IPv4 address of the server, as stores reach it. Only
	// letters, digits, dots and dashes are accepted: the host goes into
	// connection strings, where a comma, a space or an equals sign would
	// add options. An IPv6 address is refused: Feast's Redis connection
	// string splits host and port at ':', so no form of it reaches the
	// server; give the server a DNS name instead.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.-]+$`
	// +kubebuilder:validation:XValidation:rule="!self.contains(':') && !self.contains('[')",message="an IPv6 address is not supported (Feast cannot connect to one): use a DNS name that resolves to it"
	Host string `json:"host"`

	// Port of the server.
	// +kubebuilder:default=6379
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// TLS connects with TLS, verifying the server against the system roots.
	// +optional
	TLS bool `json:"tls,omitempty"`

	// ACLFile says the server loads its users from an aclfile, so the
	// operator runs ACL SAVE after each change and users survive a restart.
	// Without it users are lost on restart and the operator re-creates
	// them at its next drift check.
	// +kubebuilder:default=true
	// +optional
	ACLFile *bool `json:"aclFile,omitempty"`

	// AdminSecret holds the admin user's credentials. It lives in the
	// operator's namespace, where tenants have no access.
	AdminSecret AdminSecretReference `json:"adminSecret"`
}

// AdminSecretReference names a Secret in the operator's namespace holding a
// username and a password.
type AdminSecretReference struct {
	// Name of the Secret in the operator's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// UsernameKey is the Secret key of the username.
	// +kubebuilder:default=username
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	UsernameKey string `json:"usernameKey,omitempty"`

	// PasswordKey is the Secret key of the password.
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PasswordKey string `json:"passwordKey,omitempty"`
}

// FeatureStoreBackendStatus is what the operator observed of the server.
type FeatureStoreBackendStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True once a connection with the admin
	// credentials succeeded and the admin has the privileges the operator
	// needs; Reconciling while it waits for the admin Secret or the server;
	// Stalled when the Secret, the credentials or the privileges must be
	// fixed; DeletionBlocked while a deletion waits for FeatureStores.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// FeatureStores is how many FeatureStores name this backend.
	// +optional
	FeatureStores *int32 `json:"featureStores,omitempty"`
}

// FeatureStoreBackend registers a shared database server for FeatureStores,
// as a StorageClass registers storage: the platform team creates it, tenants
// name it in their FeatureStores and never see its admin credentials.
// Deleting a backend waits (finalizer features.mlplatform.dev/in-use) until
// no FeatureStore uses it any more, so that every store's cleanup can still
// reach its server.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=mlplatform,shortName=mlfsb
// +kubebuilder:printcolumn:name="PostgreSQL",type=string,JSONPath=`.spec.postgresql.host`
// +kubebuilder:printcolumn:name="Redis",type=string,JSONPath=`.spec.redis.host`
// +kubebuilder:printcolumn:name="Stores",type=integer,JSONPath=`.status.featureStores`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FeatureStoreBackend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FeatureStoreBackendSpec   `json:"spec"`
	Status FeatureStoreBackendStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (b *FeatureStoreBackend) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the status conditions.
func (b *FeatureStoreBackend) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// FeatureStoreBackendList is a list of FeatureStoreBackends.
//
// +kubebuilder:object:root=true
type FeatureStoreBackendList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FeatureStoreBackend `json:"items"`
}
