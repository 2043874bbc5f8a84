// Package sample is a small operator built only from the shared libraries,
// used by their integration tests to prove how they behave together against
// a real API server.
package sample
