// Package postgres provisions FeatureStore databases and roles in a shared
// PostgreSQL server, idempotently and without ever touching an object that
// does not carry the owning FeatureStore's marker.
package postgres
