package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Write is one API write a WriteCounter saw.
type Write struct {
	// Verb is create, update, patch or delete.
	Verb string
	// Resource is "resource" or "resource/subresource", such as
	// "widgets/status" or "events".
	Resource string
	// Namespace is the namespace in the request's path ("" for
	// cluster-scoped resources); for a namespace itself, its own name.
	Namespace string
	// Name is the object's name, from the path or, for a create, from the
	// JSON body; "" when neither says (a generated name, a protobuf body).
	Name string
}

// WriteCounter counts API writes at the HTTP transport of a rest.Config, so
// it sees every write a component makes through that config, including the
// event recorder's, which a client wrapper would miss.
//
// Its totals are the whole process's writes through the config: an
// operator started by one test also reconciles what earlier tests left
// behind. Assertions about one test's objects use a view, Namespace or
// Matching, which counts only those.
type WriteCounter struct {
	mu     sync.Mutex
	writes []Write
}

// NewWriteCounter returns an empty counter.
func NewWriteCounter() *WriteCounter {
	return &WriteCounter{}
}

// Wrap returns a copy of cfg whose requests are counted.
func (w *WriteCounter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if verb := writeVerb(req.Method); verb != "" {
				w.add(writeOf(verb, req))
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

func (w *WriteCounter) add(write Write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, write)
}

// Writes returns every write counted since the last Reset, in order.
func (w *WriteCounter) Writes() []Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Write(nil), w.writes...)
}

// Reset forgets every write counted so far, for every view.
func (w *WriteCounter) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = nil
}

// Namespace is the view of the writes into namespace ns: its objects,
// their events, and the namespace itself.
func (w *WriteCounter) Namespace(ns string) *WriteView {
	return w.Matching(func(wr Write) bool { return wr.Namespace == ns })
}

// Matching is the view of the writes keep accepts, for objects a namespace
// does not single out, such as cluster-scoped ones.
func (w *WriteCounter) Matching(keep func(Write) bool) *WriteView {
	return &WriteView{counter: w, keep: keep}
}

// Total is the number of writes counted since the last Reset.
func (w *WriteCounter) Total() int { return w.all().Total() }

// Count is the number of writes with the given verb (create, update, patch,
// delete) on the given resource ("widgets", "widgets/status", "events").
func (w *WriteCounter) Count(verb, resource string) int { return w.all().Count(verb, resource) }

// Snapshot returns the counts keyed by "verb resource".
func (w *WriteCounter) Snapshot() map[string]int { return w.all().Snapshot() }

// String lists the counts in a stable order, for test failure messages.
func (w *WriteCounter) String() string { return w.all().String() }

func (w *WriteCounter) all() *WriteView { return w.Matching(nil) }

// WriteView is the part of a WriteCounter's writes that a test owns. It
// reads the counter live: writes counted after it was made show in it.
type WriteView struct {
	counter *WriteCounter
	keep    func(Write) bool
}

// Writes returns the view's writes, in order.
func (v *WriteView) Writes() []Write {
	var out []Write
	for _, wr := range v.counter.Writes() {
		if v.keep == nil || v.keep(wr) {
			out = append(out, wr)
		}
	}
	return out
}

// Total is the number of writes in the view.
func (v *WriteView) Total() int { return len(v.Writes()) }

// Count is the number of writes in the view with the given verb on the
// given resource.
func (v *WriteView) Count(verb, resource string) int {
	n := 0
	for _, wr := range v.Writes() {
		if wr.Verb == verb && wr.Resource == resource {
			n++
		}
	}
	return n
}

// Snapshot returns the view's counts keyed by "verb resource".
func (v *WriteView) Snapshot() map[string]int {
	out := map[string]int{}
	for _, wr := range v.Writes() {
		out[wr.Verb+" "+wr.Resource]++
	}
	return out
}

// String lists the view's counts in a stable order, then the objects
// written, for test failure messages.
func (v *WriteView) String() string {
	snap := v.Snapshot()
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

// writeOf describes a write request. A create names its object only in
// its body, which it reads from a copy (GetBody) so the request is sent
// unchanged.
func writeOf(verb string, req *http.Request) Write {
	resource, ns, name := parsePath(req.URL.Path)
	wr := Write{Verb: verb, Resource: resource, Namespace: ns, Name: name}
	if verb == "create" && wr.Name == "" {
		wr.Name = bodyName(req)
		if wr.Resource == "namespaces" {
			wr.Namespace = wr.Name
		}
	}
	return wr
}

func bodyName(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer func() { _ = body.Close() }()
	data, err := io.ReadAll(body)
	if err != nil {
		return ""
	}
	// client-go's clientsets send built-in kinds as protobuf, which only
	// a scheme that knows the kind decodes; custom resources go as JSON.
	if obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(data, nil, nil); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			return m.GetName()
		}
	}
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &obj) != nil {
		return ""
	}
	return obj.Metadata.Name
}

// parsePath splits an API path into "resource" or "resource/subresource",
// the namespace and the name: /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]]
// or /apis/GROUP/VERSION/namespaces/NS/RESOURCE[/NAME[/SUB]], and the same
// without the namespace part for cluster-scoped resources.
func parsePath(path string) (resource, namespace, name string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path, "", ""
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		namespace = parts[1]
		switch {
		case len(parts) == 2:
			return "namespaces", namespace, namespace
		case len(parts) == 3 && (parts[2] == "finalize" || parts[2] == "status"):
			return "namespaces/" + parts[2], namespace, namespace
		}
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "namespaces", namespace, ""
	case 1:
		return parts[0], namespace, ""
	case 2:
		return parts[0], namespace, parts[1]
	default:
		return parts[0] + "/" + parts[2], namespace, parts[1]
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// WaitQuiet waits until the view has counted no new write for window: the
// operator has finished reacting to what the test did so far, so writes
// counted afterwards belong to the test's next step. A cache that caught up
// is not enough: a reconcile already queued may still write.
func (v *WriteView) WaitQuiet(t testing.TB, window time.Duration) {
	t.Helper()
	last, since := v.Total(), time.Now()
	Eventually(t, fmt.Sprintf("no operator write for %s", window), func(context.Context) (bool, error) {
		if n := v.Total(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= window, nil
	})
}
