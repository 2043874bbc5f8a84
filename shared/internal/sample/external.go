package sample

import (
	"errors"
	"sync"
)

// External stands in for a system outside Kubernetes (a database server)
// that a Widget provisions into. Failures can be switched on to exercise
// the finalizer's failure paths.
type External struct {
	mu        sync.Mutex
	records   map[string]string
	failure   error
	panicking string
	deletions int
}

// ErrUnavailable is what a switched-off External returns.
var ErrUnavailable = errors.New("external system unavailable")

// NewExternal returns an empty, working External.
func NewExternal() *External { return &External{records: map[string]string{}} }

// SetFailing makes every call fail with ErrUnavailable until switched back.
func (e *External) SetFailing(failing bool) {
	if failing {
		e.FailWith(ErrUnavailable)
		return
	}
	e.FailWith(nil)
}

// FailWith makes every call fail with err until called with nil.
func (e *External) FailWith(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failure = err
}

// SetPanicking makes Put panic with value until called with "", standing in
// for a bug in a reconciler.
func (e *External) SetPanicking(value string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.panicking = value
}

// Put stores value under key.
func (e *External) Put(key, value string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.panicking != "" {
		panic(e.panicking)
	}
	if e.failure != nil {
		return e.failure
	}
	e.records[key] = value
	return nil
}

// Get returns the value under key.
func (e *External) Get(key string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.records[key]
	return v, ok
}

// Delete removes key; a missing key is not an error, which makes cleanup
// idempotent.
func (e *External) Delete(key string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failure != nil {
		return e.failure
	}
	e.deletions++
	delete(e.records, key)
	return nil
}

// Deletions counts successful Delete calls.
func (e *External) Deletions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.deletions
}
