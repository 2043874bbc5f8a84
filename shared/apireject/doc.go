// Package apireject recognises the API server refusing an object an
// operator derived from a user's spec (invalid, malformed, too large):
// the user's to fix, so Stalled with the API's own message and no hot retry.
package apireject
