// Package kueue runs the real Kueue controller manager, built from the
// module pinned in tools/kueue, beside the test API server.
package kueue
