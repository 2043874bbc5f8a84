package manager

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Interning: each object an informer decodes brings its own copy of every
// string, though most of them are the same in every cached object: the
// namespace, the label keys, the managed-by label's value, the owner's API
// version and kind, the condition types, statuses and reasons. With tens
// of thousands of cached objects those copies are a tenth of the heap. The
// caches' transforms replace them by one shared copy each.
//
// The table is bounded, so names a hostile or careless user invents cannot
// grow it without end: once full it hands out what it holds and returns
// every other string as it came, which costs memory, never correctness.
// Only what repeats across objects goes in: strings no longer than
// internMaxLen, label values only of the keys an operator names (a job's
// name is a label value that repeats on its children only, and 20 000 of
// them would crowd out the vocabulary).
const (
	internMaxEntries = 1 << 14
	internMaxLen     = 64
)

type internTable struct {
	mu sync.Mutex
	m  map[string]string
}

// interned is the process's table: one process is one operator, and its
// caches share their vocabulary.
var interned = &internTable{m: map[string]string{}}

// Intern returns the shared copy of s when s is short enough to be
// interned, and s otherwise. Transforms use it for strings that repeat
// across the objects of a kind, such as a pod's container names.
func Intern(s string) string { return interned.intern(s) }

func (t *internTable) intern(s string) string {
	if s == "" || len(s) > internMaxLen {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[s]; ok {
		return v
	}
	if len(t.m) >= internMaxEntries {
		return s
	}
	t.m[s] = s
	return s
}

// conditioned is an object with metav1.Conditions, such as every kind of
// ml-platform.
type conditioned interface {
	GetConditions() []metav1.Condition
}

// internObject shares the repeated strings of a decoded object's metadata
// and conditions: the namespace, the keys of its labels and annotations,
// the values of the labels in values, the API versions and kinds of its
// owners, and its conditions' types, statuses and reasons. A condition's
// message is shared with an earlier condition of the object that says the
// same (a Ready condition repeats the message of the one that decides it).
// Unstructured objects are left as they are: their maps hold interfaces,
// and rebuilding them costs more than it saves.
func (t *internTable) internObject(in any, values map[string]bool) {
	if _, ok := in.(runtime.Unstructured); ok {
		return
	}
	o, ok := in.(metav1.Object)
	if !ok {
		return
	}
	o.SetNamespace(t.intern(o.GetNamespace()))
	if l := o.GetLabels(); len(l) > 0 {
		out := make(map[string]string, len(l))
		for k, v := range l {
			if values[k] {
				v = t.intern(v)
			}
			out[t.intern(k)] = v
		}
		o.SetLabels(out)
	}
	if a := o.GetAnnotations(); len(a) > 0 {
		out := make(map[string]string, len(a))
		for k, v := range a {
			out[t.intern(k)] = v
		}
		o.SetAnnotations(out)
	}
	refs := o.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = t.intern(refs[i].APIVersion), t.intern(refs[i].Kind)
	}
	if c, ok := in.(conditioned); ok {
		t.internConditions(c.GetConditions())
	}
}

func (t *internTable) internConditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Reason = t.intern(c.Type), t.intern(c.Reason)
		c.Status = metav1.ConditionStatus(t.intern(string(c.Status)))
		for _, earlier := range cs[:i] {
			if earlier.Message == c.Message {
				c.Message = earlier.Message
				break
			}
		}
	}
}

// internTransform is the transform that interns an object's metadata and
// conditions, keeping the values of the labels named in values and of the
// managed-by label.
func internTransform(values []string, managedByKey string) func(any) (any, error) {
	set := make(map[string]bool, len(values)+1)
	for _, k := range values {
		set[k] = true
	}
	set[managedByKey] = true
	return func(in any) (any, error) {
		interned.internObject(in, set)
		return in, nil
	}
}
