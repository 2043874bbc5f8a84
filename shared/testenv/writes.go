package testenv

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// WriteCounter counts API writes at the HTTP transport of a rest.Config, so
// it sees every write a component makes through that config, including the
// event recorder's, which a client wrapper would miss.
type WriteCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// NewWriteCounter returns an empty counter.
func NewWriteCounter() *WriteCounter {
	return &WriteCounter{counts: map[string]int{}}
}

// Wrap returns a copy of cfg whose requests are counted.
func (w *WriteCounter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if verb := writeVerb(req.Method); verb != "" {
				w.add(verb + " " + resourceOf(req.URL.Path))
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

func (w *WriteCounter) add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[key]++
}

// Total is the number of writes counted since the last Reset.
func (w *WriteCounter) Total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.counts {
		n += c
	}
	return n
}

// Count is the number of writes with the given verb (create, update, patch,
// delete) on the given resource ("widgets", "widgets/status", "events").
func (w *WriteCounter) Count(verb, resource string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[verb+" "+resource]
}

// Snapshot returns the counts keyed by "verb resource".
func (w *WriteCounter) Snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.counts))
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

// Reset forgets every write counted so far.
func (w *WriteCounter) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts = map[string]int{}
}

// String lists the counts in a stable order, for test failure messages.
func (w *WriteCounter) String() string {
	snap := w.Snapshot()
	keys := make([]string, 0, len(snap))
	for k := range snap {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, snap[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func writeVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	default:
		return ""
	}
}

// resourceOf extracts "resource" or "resource/subresource" from an API path:
// /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]] or
// /apis/GROUP/VERSION/namespaces/NS/RESOURCE[/NAME[/SUB]], and the same
// without the namespace part for cluster-scoped resources.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) == 3 && parts[0] == "namespaces" && (parts[2] == "finalize" || parts[2] == "status") {
		return "namespaces/" + parts[2]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "namespaces"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
