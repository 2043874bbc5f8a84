// Package featurestores is the FeatureStore suite of the platform's e2e
// tests (issue 15, suite 3), run by make e2e on the kind cluster of make
// quickstart: PostgreSQL and Redis run in the cluster as shared servers
// registered as FeatureStoreBackends; two tenants' FeatureStores on them are
// isolated (each one's credentials cannot read the other's database or
// keys); deleting with Delete removes the databases and users, Retain keeps
// them. A Notebook and a TrainingJob bound to a FeatureStore read the
// mounted feature_store.yaml and connect with it (psycopg2, redis-py and
// PyYAML from Debian in the jupyter and pytorch images).
package featurestores
