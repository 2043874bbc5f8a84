// Package redis provisions FeatureStore online stores in a shared Redis
// server: one ACL user per store, allowed only the commands Feast's Redis
// online store sends and only keys that end in the store's project, with
// project names kept suffix-free per server so no store can reach
// another's keys.
package redis
