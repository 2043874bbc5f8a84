// Package testing builds FeatureStores and FeatureStoreBackends for tests
// in a few fluent calls, so a test names only the fields it is about.
package testing

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

// FeatureStoreWrapper builds a FeatureStore.
type FeatureStoreWrapper struct{ featuresv1alpha1.FeatureStore }

// MakeFeatureStore is a FeatureStore of the given Feast project with no
// stores yet: set them with Online, Offline and Registry, or Backends.
func MakeFeatureStore(ns, name, project string) *FeatureStoreWrapper {
	return &FeatureStoreWrapper{featuresv1alpha1.FeatureStore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       featuresv1alpha1.FeatureStoreSpec{Project: project},
	}}
}

// Obj returns the FeatureStore built so far.
func (w *FeatureStoreWrapper) Obj() *featuresv1alpha1.FeatureStore { return &w.FeatureStore }

// Backends puts the online store on the Redis backend, and the offline
// store and the registry on the PostgreSQL backend.
func (w *FeatureStoreWrapper) Backends(redis, postgres string) *FeatureStoreWrapper {
	return w.Online(redis).Offline(postgres).Registry(postgres)
}

// Online puts the online store on a shared backend.
func (w *FeatureStoreWrapper) Online(backend string) *FeatureStoreWrapper {
	w.Spec.OnlineStore = featuresv1alpha1.StoreSource{Backend: backend}
	return w
}

// Offline puts the offline store on a shared backend.
func (w *FeatureStoreWrapper) Offline(backend string) *FeatureStoreWrapper {
	w.Spec.OfflineStore = featuresv1alpha1.StoreSource{Backend: backend}
	return w
}

// Registry puts the registry on a shared backend.
func (w *FeatureStoreWrapper) Registry(backend string) *FeatureStoreWrapper {
	w.Spec.Registry = featuresv1alpha1.StoreSource{Backend: backend}
	return w
}

// Retain keeps the databases and users when the FeatureStore is deleted.
func (w *FeatureStoreWrapper) Retain() *FeatureStoreWrapper {
	w.Spec.DeletionPolicy = commonv1alpha1.DeletionPolicyRetain
	return w
}

// BackendWrapper builds a FeatureStoreBackend.
type BackendWrapper struct {
	featuresv1alpha1.FeatureStoreBackend
}

// MakeBackend is a FeatureStoreBackend without a server yet: set one with
// PostgreSQL or Redis.
func MakeBackend(name string) *BackendWrapper {
	return &BackendWrapper{featuresv1alpha1.FeatureStoreBackend{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Obj returns the FeatureStoreBackend built so far.
func (w *BackendWrapper) Obj() *featuresv1alpha1.FeatureStoreBackend { return &w.FeatureStoreBackend }

// PostgreSQL makes it a PostgreSQL server without TLS, whose admin
// credentials are in the Secret adminSecret of the operator's namespace.
func (w *BackendWrapper) PostgreSQL(host string, port int32, adminSecret string) *BackendWrapper {
	w.Spec.PostgreSQL = &featuresv1alpha1.PostgreSQLBackend{Host: host, Port: port, SSLMode: "disable",
		AdminSecret: featuresv1alpha1.AdminSecretReference{Name: adminSecret}}
	return w
}

// Redis makes it a Redis server that keeps its users in an aclfile.
func (w *BackendWrapper) Redis(host string, port int32, adminSecret string) *BackendWrapper {
	aclFile := true
	w.Spec.Redis = &featuresv1alpha1.RedisBackend{Host: host, Port: port, ACLFile: &aclFile,
		AdminSecret: featuresv1alpha1.AdminSecretReference{Name: adminSecret}}
	return w
}
