// Package dbtest runs real PostgreSQL and Redis servers for tests: per-run
// instances in temporary folders on free loopback ports, which tests can
// stop and start again.
package dbtest
