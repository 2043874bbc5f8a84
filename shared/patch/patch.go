package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// maxAttempts bounds the re-read and retry loop on conflicts. A conflict
// means somebody else wrote in between; a handful of retries absorbs normal
// contention, and past that the reconcile fails and is retried with backoff.
const maxAttempts = 5

// Helper remembers an object as a reconcile read it and later writes what
// the reconcile changed.
//
// Both writes are JSON merge patches guarded by the resourceVersion the
// patch was computed from (an optimistic lock): CRDs support no strategic
// merge patch, and a plain merge patch replaces whole lists such as
// finalizers and conditions, which would drop entries another writer added
// in between. On a conflict the helper reads the live object from the API
// server (not the cache, which may still be stale), applies only this
// reconcile's changes to it again and retries. Metadata changes are limited
// to labels, annotations and finalizers: the operator never writes spec.
type Helper struct {
	client client.Client
	live   client.Reader
	gvk    schema.GroupVersionKind
	before *unstructured.Unstructured
}

// NewHelper snapshots obj. live must read from the API server directly
// (manager.GetAPIReader()); it is used only after a conflict.
func NewHelper(obj client.Object, c client.Client, live client.Reader) (*Helper, error) {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return nil, err
	}
	before, err := snapshot(obj, gvk)
	if err != nil {
		return nil, err
	}
	return &Helper{client: c, live: live, gvk: gvk, before: before}, nil
}

// Result says which writes Patch made.
type Result struct {
	MetadataPatched bool
	StatusPatched   bool
}

// Patch writes the changes made to obj since NewHelper: first labels,
// annotations and finalizers through the main resource, then status through
// the status subresource. Each write happens only when that part changed.
// On success obj holds the object as the API server returned it.
func (h *Helper) Patch(ctx context.Context, obj client.Object) (Result, error) {
	var res Result
	after, err := snapshot(obj, h.gvk)
	if err != nil {
		return res, err
	}
	base := h.before
	// Whether every write started from the version obj was read at: then
	// the API server's answer differs from obj in metadata and status
	// alone (the lock kept anybody else's change out), and only those
	// are copied back.
	same := true
	if md := diffMetadata(h.before, after); !md.empty() {
		written, err := h.write(ctx, base, md.applyTo, false, &same)
		if err != nil {
			return res, fmt.Errorf("patching metadata of %s %s: %w", h.gvk.Kind, client.ObjectKeyFromObject(obj), err)
		}
		if written != nil {
			res.MetadataPatched = true
			base = written
		}
	}
	if sd := diffStatus(h.before, after); !sd.empty() {
		written, err := h.write(ctx, base, sd.applyTo, true, &same)
		if err != nil {
			return res, fmt.Errorf("patching status of %s %s: %w", h.gvk.Kind, client.ObjectKeyFromObject(obj), err)
		}
		if written != nil {
			res.StatusPatched = true
			base = written
		}
	}
	if res.MetadataPatched || res.StatusPatched {
		if err := restore(base, obj, same); err != nil {
			return res, err
		}
		// The caller may keep reconciling with obj; later changes are
		// measured from what is now persisted.
		h.before = base
	}
	return res, nil
}

// write applies change to base and patches the difference, retrying on
// conflict from a fresh read. It returns the persisted object, or nil when
// the live object already had the change and nothing was written.
func (h *Helper) write(ctx context.Context, base *unstructured.Unstructured, change func(*unstructured.Unstructured), status bool, same *bool) (*unstructured.Unstructured, error) {
	part := "metadata"
	if status {
		part = "status"
	}
	var replaced []string
	for attempt := 1; ; attempt++ {
		replaced = append(replaced, base.GetResourceVersion())
		desired := withOwnCopyOf(base, part)
		change(desired)
		p, changed, err := mergePatchOf(base, desired, part)
		if err != nil {
			return nil, err
		}
		if !changed {
			return nil, nil
		}
		if status {
			err = h.client.Status().Patch(ctx, desired, p)
		} else {
			err = h.client.Patch(ctx, desired, p)
		}
		if err == nil {
			ownWrites.record(desired.GetUID(), replaced, desired.GetResourceVersion())
			return desired, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxAttempts {
			return nil, err
		}
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(h.gvk)
		if err := h.live.Get(ctx, client.ObjectKey{Namespace: base.GetNamespace(), Name: base.GetName()}, fresh); err != nil {
			return nil, err
		}
		if fresh.GetUID() != base.GetUID() {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: h.gvk.Group, Resource: h.gvk.Kind}, base.GetName())
		}
		base = fresh
		*same = false
	}
}

// withOwnCopyOf is base with a copy of its own of the top-level field
// part, the only one a change may modify: the rest (a spec of kilobytes,
// say) is shared, and neither the change nor decoding the API server's
// answer, which replaces the whole map, writes to it.
func withOwnCopyOf(base *unstructured.Unstructured, part string) *unstructured.Unstructured {
	m := maps.Clone(base.Object)
	if v, ok := m[part]; ok {
		m[part] = runtime.DeepCopyJSONValue(v)
	}
	return &unstructured.Unstructured{Object: m}
}

// mergePatchOf is the JSON merge patch (RFC 7386) that turns base's part
// into desired's, guarded by base's resourceVersion, and whether there is
// anything to write. It is computed on the maps, part alone: rendering
// both whole objects to JSON and parsing them again to diff them, as
// client.MergeFrom does, cost more than half of a status write.
func mergePatchOf(base, desired *unstructured.Unstructured, part string) (client.Patch, bool, error) {
	before, _ := base.Object[part].(map[string]any)
	after, _ := desired.Object[part].(map[string]any)
	diff := mergePatch(before, after)
	if len(diff) == 0 {
		return nil, false, nil
	}
	body := map[string]any{part: diff}
	meta, _ := body["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		body["metadata"] = meta
	}
	meta["resourceVersion"] = base.GetResourceVersion()
	data, err := json.Marshal(body)
	if err != nil {
		return nil, false, err
	}
	return client.RawPatch(types.MergePatchType, data), true, nil
}

// mergePatch returns what a JSON merge patch must say to turn before into
// after: the fields after sets or changes (objects recursively, anything
// else whole, lists included), and null for those it drops. Empty means
// equal.
func mergePatch(before, after map[string]any) map[string]any {
	out := map[string]any{}
	for k, a := range after {
		b, ok := before[k]
		if !ok {
			out[k] = a
			continue
		}
		am, aIsObject := a.(map[string]any)
		bm, bIsObject := b.(map[string]any)
		if aIsObject && bIsObject {
			if sub := mergePatch(bm, am); len(sub) > 0 {
				out[k] = sub
			}
			continue
		}
		if !reflect.DeepEqual(a, b) {
			out[k] = a
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// snapshot is what the helper compares and writes of obj, its metadata and
// status, as unstructured: the spec, which a reconcile never writes, is
// left out (converting it cost as much as the rest of a status write).
// An object whose status it cannot find is taken whole.
func snapshot(obj client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	var m map[string]any
	var err error
	if meta, status, ok := parts(obj); ok {
		m = map[string]any{}
		if m["metadata"], err = runtime.DefaultUnstructuredConverter.ToUnstructured(meta); err != nil {
			return nil, err
		}
		if m["status"], err = runtime.DefaultUnstructuredConverter.ToUnstructured(status); err != nil {
			return nil, err
		}
	} else if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// restore copies the API server's answer into obj: its metadata and status
// when obj's spec is still what the server holds (same), all of it
// otherwise.
func restore(persisted *unstructured.Unstructured, obj client.Object, same bool) error {
	meta, status, ok := parts(obj)
	if !same || !ok {
		return runtime.DefaultUnstructuredConverter.FromUnstructured(persisted.Object, obj)
	}
	m, _ := persisted.Object["metadata"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, meta); err != nil {
		return err
	}
	s, _ := persisted.Object["status"].(map[string]any)
	return runtime.DefaultUnstructuredConverter.FromUnstructured(s, status)
}

// parts returns pointers to obj's ObjectMeta and to its status struct (the
// field whose JSON name is status), or false when obj is not a struct with
// both, an Unstructured say.
func parts(obj client.Object) (*metav1.ObjectMeta, any, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, nil, false
	}
	accessor, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, nil, false
	}
	meta, ok := accessor.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil, nil, false
	}
	f, ok := v.Elem().Type().FieldByName("Status")
	if !ok || f.Type.Kind() != reflect.Struct || strings.Split(f.Tag.Get("json"), ",")[0] != "status" {
		return nil, nil, false
	}
	return meta, v.Elem().FieldByIndex(f.Index).Addr().Interface(), true
}

// metadataDelta is what a reconcile changed in labels, annotations and
// finalizers, as operations that can be replayed on a newer object.
type metadataDelta struct {
	labels, annotations mapDelta
	addFinalizers       []string
	removeFinalizers    []string
}

// mapDelta holds the keys set (to a value) or removed (nil) by a reconcile.
type mapDelta map[string]*string

func (d metadataDelta) empty() bool {
	return len(d.labels) == 0 && len(d.annotations) == 0 && len(d.addFinalizers) == 0 && len(d.removeFinalizers) == 0
}

func diffMetadata(before, after *unstructured.Unstructured) metadataDelta {
	return metadataDelta{
		labels:           diffMap(before.GetLabels(), after.GetLabels()),
		annotations:      diffMap(before.GetAnnotations(), after.GetAnnotations()),
		addFinalizers:    missingFrom(before.GetFinalizers(), after.GetFinalizers()),
		removeFinalizers: missingFrom(after.GetFinalizers(), before.GetFinalizers()),
	}
}

func (d metadataDelta) applyTo(u *unstructured.Unstructured) {
	u.SetLabels(d.labels.applyTo(u.GetLabels()))
	u.SetAnnotations(d.annotations.applyTo(u.GetAnnotations()))
	fins := u.GetFinalizers()
	for _, f := range d.addFinalizers {
		if !slices.Contains(fins, f) {
			fins = append(fins, f)
		}
	}
	fins = slices.DeleteFunc(fins, func(f string) bool { return slices.Contains(d.removeFinalizers, f) })
	u.SetFinalizers(fins)
}

func diffMap(before, after map[string]string) mapDelta {
	d := mapDelta{}
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			d[k] = &v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d[k] = nil
		}
	}
	return d
}

func (d mapDelta) applyTo(m map[string]string) map[string]string {
	if len(d) == 0 {
		return m
	}
	out := make(map[string]string, len(m)+len(d))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range d {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}

// missingFrom returns the entries of b that are not in a.
func missingFrom(a, b []string) []string {
	var out []string
	for _, s := range b {
		if !slices.Contains(a, s) {
			out = append(out, s)
		}
	}
	return out
}

// statusDelta is what a reconcile changed in status, as operations that can
// be replayed on a newer object: top-level fields it set or cleared, and
// conditions per type. Fields and conditions the reconcile left alone keep
// whatever the live object holds, so a reconcile that started from a lagging
// cache never undoes a newer write to them.
type statusDelta struct {
	fields     map[string]any            // field -> new value, nil when cleared
	conditions map[string]map[string]any // type -> condition, nil when removed
	order      []string                  // condition types in the reconcile's order
}

func (d statusDelta) empty() bool { return len(d.fields) == 0 && len(d.conditions) == 0 }

func diffStatus(before, after *unstructured.Unstructured) statusDelta {
	b, _, _ := unstructured.NestedMap(before.Object, "status")
	a, _, _ := unstructured.NestedMap(after.Object, "status")
	d := statusDelta{fields: map[string]any{}, conditions: map[string]map[string]any{}}
	bc, ac := conditionsByType(b), conditionsByType(a)
	for _, c := range conditionList(a) {
		d.order = append(d.order, conditionType(c))
	}
	for t, c := range ac {
		if !reflect.DeepEqual(bc[t], c) {
			d.conditions[t] = c
		}
	}
	for t := range bc {
		if _, ok := ac[t]; !ok {
			d.conditions[t] = nil
		}
	}
	delete(b, "conditions")
	delete(a, "conditions")
	for k, v := range a {
		if old, ok := b[k]; !ok || !reflect.DeepEqual(old, v) {
			d.fields[k] = v
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d.fields[k] = nil
		}
	}
	return d
}

func (d statusDelta) applyTo(u *unstructured.Unstructured) {
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	for k, v := range d.fields {
		if v == nil {
			delete(status, k)
		} else {
			status[k] = v
		}
	}
	var conds []any
	seen := map[string]bool{}
	for _, c := range conditionList(status) {
		t := conditionType(c)
		seen[t] = true
		replacement, changed := d.conditions[t]
		switch {
		case !changed:
			conds = append(conds, c)
		case replacement != nil:
			conds = append(conds, replacement)
		}
	}
	for _, t := range d.order {
		if replacement := d.conditions[t]; replacement != nil && !seen[t] {
			conds = append(conds, replacement)
		}
	}
	delete(status, "conditions")
	if len(conds) > 0 {
		status["conditions"] = conds
	}
	u.Object["status"] = status
}

func conditionList(status map[string]any) []any {
	list, _, _ := unstructured.NestedSlice(status, "conditions")
	return list
}

func conditionType(c any) string {
	m, _ := c.(map[string]any)
	t, _ := m["type"].(string)
	return t
}

func conditionsByType(status map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, c := range conditionList(status) {
		if m, ok := c.(map[string]any); ok {
			out[conditionType(m)] = m
		}
	}
	return out
}
