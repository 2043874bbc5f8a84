package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// Applier writes an operator's children.
type Applier struct {
	// Client reads the live children, from the operator's cache, and
	// writes them.
	Client client.Client
	// APIReader reads past the cache, which holds only the objects
	// labelled as the operator's: an object the cache does not show may
	// still exist and be somebody else's.
	APIReader client.Reader
	// FieldOwner is the operator's field manager.
	FieldOwner string
	// HashAnnotation, when set, is stamped on every applied object with
	// the hash of everything applied. Being one of the applied fields, it
	// makes any change of what the operator sets, even a field it stops
	// setting, visible to the field-by-field drift comparison, which alone
	// could not see a removal.
	HashAnnotation string
	// Exact are paths, such as "spec.ingress", where a live object that
	// holds more than desired sets has drifted (see Drift).
	Exact []string
}

// Owner decides which existing objects belong to the caller, and names
// them in the error that refuses any other.
type Owner struct {
	Owns func(client.Object) bool
	// Name says whose the object should be, such as "this FeatureStore".
	Name string
	// Remedy is what the user can do besides removing the foreign object,
	// such as "give the FeatureStore another name".
	Remedy string
}

// ControlledBy is the Owner of objects whose controller reference is to
// owner, an object of the given kind.
func ControlledBy(owner metav1.Object, kind string) Owner {
	return Owner{
		Owns:   func(obj client.Object) bool { return metav1.IsControlledBy(obj, owner) },
		Name:   "this " + kind,
		Remedy: "give the " + kind + " another name",
	}
}

// ManagedBy is the Owner of objects labelled as the operator's, whoever
// of its objects they were made for; remedy is as for Owner.
func ManagedBy(operator, remedy string) Owner {
	return Owner{
		Owns:   func(obj client.Object) bool { return obj.GetLabels()[commonv1alpha1.LabelManagedBy] == operator },
		Name:   "the " + operator,
		Remedy: remedy,
	}
}

// ForeignError says an object of a name the caller needs exists and is
// not the caller's. It is never adopted, overwritten or read as ours.
type ForeignError struct {
	Kind, Namespace, Name string
	Owner, Remedy         string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and does not belong to %s; it is left untouched. Delete or rename it, or %s",
		e.Kind, e.Namespace, e.Name, e.Owner, e.Remedy)
}

// IsForeign reports whether err is, or wraps, a ForeignError.
func IsForeign(err error) bool {
	var f *ForeignError
	return errors.As(err, &f)
}

// Check returns a ForeignError unless obj, an existing object of kind,
// belongs to owner.
func Check(obj client.Object, kind string, owner Owner) error {
	if owner.Owns(obj) {
		return nil
	}
	return &ForeignError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Owner: owner.Name, Remedy: owner.Remedy}
}

// CheckLive asks the API server, past the cache, whether an object of
// gvk with obj's name exists and is not owner's: a ForeignError then,
// nil when it does not exist or is owner's.
func (a *Applier) CheckLive(ctx context.Context, obj client.Object, gvk schema.GroupVersionKind, owner Owner) error {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return Check(live, gvk.Kind, owner)
}

// Create creates obj, a child the operator writes once and never again: a
// Secret holding a generated password or token, which applying again would
// replace. When an object of that name exists already, Create returns a
// ForeignError if it is not owner's (asked past the cache, which may not
// show it), else the API server's AlreadyExists error: the caller then
// reads the existing object, which a concurrent reconcile created.
func (a *Applier) Create(ctx context.Context, obj client.Object, owner Owner) error {
	err := a.Client.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	gvk, gvkErr := apiutil.GVKForObject(obj, a.Client.Scheme())
	if gvkErr != nil {
		return gvkErr
	}
	if foreign := a.CheckLive(ctx, obj, gvk, owner); foreign != nil {
		return foreign
	}
	return err
}

// Apply writes desired with server-side apply, as the operator's field
// manager, when the live object lacks a field desired sets or holds
// another value there: a change of what the operator wants, or somebody
// else's change to a field the operator owns, which the apply reverts.
// Fields only other actors set (Kueue's nodeSelector and tolerations,
// defaults, webhooks' additions, a user's annotations) are no reason to
// write and survive the apply. An existing object that is not owner's is
// refused with a ForeignError and left untouched. A child the cache does
// not show is created by an apply that fails when the name is taken
// (absentOnly); only then is the object looked up past the cache. Apply
// reports whether it wrote; it sets desired's type and, with a
// HashAnnotation, stamps it.
func (a *Applier) Apply(ctx context.Context, desired client.Object, owner Owner) (bool, error) {
	gvk, err := apiutil.GVKForObject(desired, a.Client.Scheme())
	if err != nil {
		return false, err
	}
	desired.GetObjectKind().SetGroupVersionKind(gvk)
	if err := a.stampHash(desired); err != nil {
		return false, err
	}
	live, err := a.live(ctx, a.Client, desired, gvk)
	if err != nil {
		return false, err
	}
	if live == nil {
		created, err := a.createOnly(ctx, desired)
		if !apierrors.IsConflict(err) {
			return created, err
		}
		// An object of that name exists: the operator's own, which the
		// cache does not show yet, or somebody else's, of which nothing
		// but its metadata is read.
		if err := a.CheckLive(ctx, desired, gvk, owner); err != nil {
			return false, err
		}
		if live, err = a.live(ctx, a.APIReader, desired, gvk); err != nil {
			return false, err
		}
		if live == nil {
			return false, fmt.Errorf("%s %s was there a moment ago and is gone", gvk.Kind, desired.GetName())
		}
	}
	if write, err := a.drifted(ctx, desired, live, gvk, owner); !write || err != nil {
		return false, err
	}
	body, err := content(desired)
	if err != nil {
		return false, err
	}
	if err := a.apply(ctx, body); err != nil {
		return false, err
	}
	return true, nil
}

// createOnly creates desired with server-side apply, and fails with a
// Conflict, writing nothing, when an object of its name exists.
func (a *Applier) createOnly(ctx context.Context, desired client.Object) (bool, error) {
	body, err := content(desired)
	if err != nil {
		return false, err
	}
	meta, _ := body["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		body["metadata"] = meta
	}
	meta["resourceVersion"] = absentOnly
	if err := a.apply(ctx, body); err != nil {
		return false, err
	}
	return true, nil
}

// absentOnly is a resourceVersion no stored object has: etcd's first write
// is its revision 2. An apply that carries it creates the object when there
// is none (a create ignores the resourceVersion it is sent), and fails with
// a Conflict, writing nothing, when there is one: an existing object's
// resourceVersion must match. So a child the cache does not show is created
// in one request, with its fields owned by the operator's apply as any
// later apply's are, where asking the API server first whether the name is
// taken cost a read on every creation, in the path of a new object's first
// reconcile.
const absentOnly = "1"

// apply writes body with server-side apply, as the operator's field
// manager, taking over any field another manager set.
func (a *Applier) apply(ctx context.Context, body map[string]any) error {
	u := &unstructured.Unstructured{Object: body}
	return a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership, client.FieldOwner(a.FieldOwner))
}

// live reads the object of desired's name through reader, the cache or
// past it; nil when absent.
func (a *Applier) live(ctx context.Context, reader client.Reader, desired client.Object, gvk schema.GroupVersionKind) (client.Object, error) {
	obj, err := a.Client.Scheme().New(gvk)
	if err != nil {
		return nil, err
	}
	live, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object kind", gvk)
	}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return live, nil
}

// drifted refuses a foreign live object and reports whether live lacks
// something desired sets.
func (a *Applier) drifted(ctx context.Context, desired, live client.Object, gvk schema.GroupVersionKind, owner Owner) (bool, error) {
	if err := Check(live, gvk.Kind, owner); err != nil {
		return false, err
	}
	field, err := Drift(desired, live, a.Exact...)
	if err != nil || field == "" {
		return false, err
	}
	if a.HashAnnotation != "" && live.GetAnnotations()[a.HashAnnotation] == desired.GetAnnotations()[a.HashAnnotation] {
		log.FromContext(ctx).Info("Reverting a change to a field the operator owns",
			"kind", gvk.Kind, "name", desired.GetName(), "field", field)
	}
	return true, nil
}

// stampHash sets the HashAnnotation to the hash of everything else
// applied.
func (a *Applier) stampHash(desired client.Object) error {
	if a.HashAnnotation == "" {
		return nil
	}
	ann := maps.Clone(desired.GetAnnotations())
	delete(ann, a.HashAnnotation)
	desired.SetAnnotations(ann)
	body, err := content(desired)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[a.HashAnnotation] = hex.EncodeToString(sum[:])[:16]
	desired.SetAnnotations(ann)
	return nil
}

// content is what is applied of desired: neither status nor null fields
// (a zero creationTimestamp), nor what the API server drops from a
// StatefulSet's claim templates (their type and status), which would
// otherwise show as drift on every reconcile.
func content(desired runtime.Object) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return nil, fmt.Errorf("converting the desired %T: %w", desired, err)
	}
	delete(m, "status")
	dropNulls(m)
	if claims, ok, _ := unstructured.NestedSlice(m, "spec", "volumeClaimTemplates"); ok {
		for _, c := range claims {
			if cm, ok := c.(map[string]any); ok {
				delete(cm, "apiVersion")
				delete(cm, "kind")
				delete(cm, "status")
			}
		}
		if err := unstructured.SetNestedSlice(m, claims, "spec", "volumeClaimTemplates"); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range t {
			dropNulls(e)
		}
	}
}
