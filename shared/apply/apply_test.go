package apply

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, &env)
}

const operator = "test-operator"

var owner = ManagedBy(operator, "rename the Widget")

// harness is an Applier whose writes are counted, reading live objects
// through a client that, like the operator's cache, shows only labelled
// objects; admin writes as other actors do.
type harness struct {
	applier *Applier
	writes  *testenv.WriteView
	// liveReads counts the applier's reads past the cache, and fullReads
	// those of them that read more than the metadata.
	liveReads, fullReads *atomic.Int32
	admin                client.Client
	ns                   string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	admin, err := client.NewWithWatch(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	counter := testenv.NewWriteCounter()
	counted, err := client.NewWithWatch(counter.Wrap(env.Config), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cacheLike := interceptor.NewClient(counted, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if obj.GetLabels()[commonv1alpha1.LabelManagedBy] != operator {
				return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
			}
			return nil
		},
	})
	liveReads, fullReads := &atomic.Int32{}, &atomic.Int32{}
	apiReader := interceptor.NewClient(admin, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			liveReads.Add(1)
			if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
				fullReads.Add(1)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	ns := testenv.CreateNamespace(t, admin, "apply")
	return &harness{
		applier:   &Applier{Client: cacheLike, APIReader: apiReader, FieldOwner: operator, HashAnnotation: "test/applied-hash"},
		writes:    counter.Namespace(ns),
		liveReads: liveReads,
		fullReads: fullReads,
		admin:     admin,
		ns:        ns,
	}
}

func (h *harness) apply(t *testing.T, obj client.Object) bool {
	t.Helper()
	written, err := h.applier.Apply(t.Context(), obj, owner)
	if err != nil {
		t.Fatal(err)
	}
	return written
}

// statefulSet is a desired StatefulSet with a claim template, whose type
// the API server drops.
func statefulSet(ns string) *appsv1.StatefulSet {
	labels := map[string]string{commonv1alpha1.LabelManagedBy: operator, "app": "w"}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w", Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: "w",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "w"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

func TestApplyWritesOnlyWhenSomethingChanged(t *testing.T) {
	h := newHarness(t)
	if !h.apply(t, statefulSet(h.ns)) {
		t.Fatal("the first apply did not write")
	}
	if n := h.writes.Count("patch", "statefulsets"); n != 1 {
		t.Fatalf("first apply: %d patches, want 1: %s", n, h.writes)
	}
	// The name was free: the create itself said so, with no read first.
	if n := h.liveReads.Load(); n != 0 {
		t.Errorf("the first apply read past the cache %d times, want 0", n)
	}
	// Applying the same again, claim template and all, writes nothing.
	for range 3 {
		if h.apply(t, statefulSet(h.ns)) {
			t.Fatalf("an unchanged StatefulSet was written again: %s", h.writes)
		}
	}
	if n := h.writes.Total(); n != 1 {
		t.Fatalf("%d writes for one change, want 1: %s", n, h.writes)
	}
	// A field the operator stops setting is a change: it is removed.
	less := statefulSet(h.ns)
	delete(less.Labels, "app")
	if !h.apply(t, less) {
		t.Fatal("dropping a label was not applied")
	}
	live := &appsv1.StatefulSet{}
	if err := h.admin.Get(t.Context(), client.ObjectKeyFromObject(less), live); err != nil {
		t.Fatal(err)
	}
	if _, ok := live.Labels["app"]; ok {
		t.Errorf("the label the operator stopped setting is still there: %v", live.Labels)
	}
}

func TestApplyCorrectsDriftOnOwnedFieldsOnly(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	h.apply(t, statefulSet(h.ns))
	live := &appsv1.StatefulSet{}
	if err := h.admin.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "w"}, live); err != nil {
		t.Fatal(err)
	}
	// Kueue-like admission and a user change fields: one the operator
	// owns (replicas), and some it never sets.
	live.Spec.Replicas = ptr.To[int32](0)
	live.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	live.Annotations = map[string]string{"team.example/note": "keep me", "test/applied-hash": live.Annotations["test/applied-hash"]}
	if err := h.admin.Update(ctx, live, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	before := h.writes.Total()
	if !h.apply(t, statefulSet(h.ns)) {
		t.Fatal("drift on spec.replicas was not corrected")
	}
	got := &appsv1.StatefulSet{}
	if err := h.admin.Get(ctx, client.ObjectKeyFromObject(live), got); err != nil {
		t.Fatal(err)
	}
	if r := ptr.Deref(got.Spec.Replicas, -1); r != 1 {
		t.Errorf("replicas = %d, want the operator's 1", r)
	}
	if got.Spec.Template.Spec.NodeSelector["pool"] != "gpu" {
		t.Errorf("another actor's nodeSelector was dropped: %v", got.Spec.Template.Spec.NodeSelector)
	}
	if got.Annotations["team.example/note"] != "keep me" {
		t.Errorf("a user's annotation was dropped: %v", got.Annotations)
	}
	if h.apply(t, statefulSet(h.ns)) {
		t.Error("a corrected StatefulSet was written again")
	}
	if n := h.writes.Total() - before; n != 1 {
		t.Errorf("%d writes to correct one drift, want 1: %s", n, h.writes)
	}
}

func TestApplyRefusesForeignObjects(t *testing.T) {
	for name, labels := range map[string]map[string]string{
		// Unlabelled: the cache does not show it, the API server does.
		"hidden from the cache": nil,
		// Labelled as another operator's.
		"another operator's": {commonv1alpha1.LabelManagedBy: "other-operator"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			ctx := t.Context()
			foreign := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "w", Labels: labels},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "theirs", Port: 81}}},
			}
			if err := h.admin.Create(ctx, foreign); err != nil {
				t.Fatal(err)
			}
			desired := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "w", Labels: map[string]string{commonv1alpha1.LabelManagedBy: operator}},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "ours", Port: 80}}},
			}
			written, err := h.applier.Apply(ctx, desired, owner)
			var fe *ForeignError
			if !errors.As(err, &fe) || written {
				t.Fatalf("Apply = %v, %v; want a ForeignError and no write", written, err)
			}
			if fe.Kind != "Service" || fe.Namespace != h.ns || fe.Name != "w" {
				t.Errorf("the error names %s %s/%s, want Service %s/w", fe.Kind, fe.Namespace, fe.Name, h.ns)
			}
			got := &corev1.Service{}
			if err := h.admin.Get(ctx, client.ObjectKeyFromObject(foreign), got); err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != foreign.ResourceVersion {
				t.Errorf("the foreign Service was written: resourceVersion %s, was %s", got.ResourceVersion, foreign.ResourceVersion)
			}
			// One request was made: the apply that creates only, which
			// the API server refused, as the resourceVersion shows.
			if n := h.writes.Count("patch", "services"); n != 1 {
				t.Errorf("%d patches of the foreign Service, want the one refused create: %s", n, h.writes)
			}
			for _, m := range got.ManagedFields {
				if m.Manager == operator {
					t.Errorf("the foreign Service names the operator as a field manager: %+v", m)
				}
			}
			if n := h.fullReads.Load(); n != 0 {
				t.Errorf("the foreign Service was read whole %d times; its metadata tells whose it is", n)
			}
		})
	}
}

// TestCreateWritesOnceAndTellsOursFromForeign: a create-only child (a
// Secret with a generated token) is created once; a second Create finds it
// and reports AlreadyExists, so the caller reads the existing value; an
// object of that name that is not the owner's, hidden from the cache or
// labelled as another operator's, is a ForeignError and stays untouched.
func TestCreateWritesOnceAndTellsOursFromForeign(t *testing.T) {
	secret := func(ns, name string, labels map[string]string, token string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, StringData: map[string]string{"token": token}}
	}
	ours := map[string]string{commonv1alpha1.LabelManagedBy: operator}
	h := newHarness(t)
	ctx := t.Context()

	if err := h.applier.Create(ctx, secret(h.ns, "token", ours, "first"), owner); err != nil {
		t.Fatalf("first Create: %v", err)
	}
	if err := h.applier.Create(ctx, secret(h.ns, "token", ours, "second"), owner); !apierrors.IsAlreadyExists(err) || IsForeign(err) {
		t.Errorf("second Create of our own Secret = %v, want AlreadyExists", err)
	}
	got := &corev1.Secret{}
	if err := h.admin.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "token"}, got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["token"]) != "first" {
		t.Errorf("token = %q, want the first one kept", got.Data["token"])
	}

	for name, tc := range map[string]struct {
		secret string
		labels map[string]string
	}{
		"hidden from the cache": {secret: "hidden", labels: nil},
		"another operator's":    {secret: "other", labels: map[string]string{commonv1alpha1.LabelManagedBy: "other-operator"}},
	} {
		t.Run(name, func(t *testing.T) {
			foreign := secret(h.ns, tc.secret, tc.labels, "theirs")
			if err := h.admin.Create(ctx, foreign); err != nil {
				t.Fatal(err)
			}
			err := h.applier.Create(ctx, secret(h.ns, foreign.Name, ours, "ours"), owner)
			var fe *ForeignError
			if !errors.As(err, &fe) || fe.Kind != "Secret" || fe.Name != foreign.Name {
				t.Fatalf("Create over a foreign Secret = %v, want a ForeignError naming it", err)
			}
			got := &corev1.Secret{}
			if err := h.admin.Get(ctx, client.ObjectKeyFromObject(foreign), got); err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != foreign.ResourceVersion {
				t.Error("the foreign Secret was written")
			}
		})
	}
}

// TestApplyOverItsOwnChildTheCacheDoesNotShowYet: right after the operator
// created a child, its cache may not hold it. The apply that creates only
// is refused; the child looked up past the cache is the operator's, and
// the apply writes what changed, or nothing when nothing did.
func TestApplyOverItsOwnChildTheCacheDoesNotShowYet(t *testing.T) {
	h := newHarness(t)
	first := statefulSet(h.ns)
	h.apply(t, first)
	lagging := *h.applier
	lagging.Client = interceptor.NewClient(h.applier.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewNotFound(schema.GroupResource{}, "")
		},
	})
	changed := statefulSetWithReplicas(h.ns, 2)
	written, err := lagging.Apply(t.Context(), changed, owner)
	if err != nil || !written {
		t.Fatalf("Apply = %v, %v; want a write", written, err)
	}
	live := &appsv1.StatefulSet{}
	if err := h.admin.Get(t.Context(), client.ObjectKeyFromObject(changed), live); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(live.Spec.Replicas, 0); got != 2 {
		t.Errorf("replicas = %d, want the 2 applied", got)
	}
	// The refused create and the apply; past the cache, the metadata that
	// told whose it is, then the object to compare.
	if n := h.writes.Count("patch", "statefulsets"); n != 3 {
		t.Errorf("%d patches, want 3 (the first create, the refused one, the apply): %s", n, h.writes)
	}
	if n := h.liveReads.Load(); n != 2 {
		t.Errorf("%d reads past the cache, want 2", n)
	}
	// Nothing changed: the object read past the cache shows it, and only
	// the refused create is sent.
	written, err = lagging.Apply(t.Context(), statefulSetWithReplicas(h.ns, 2), owner)
	if err != nil || written {
		t.Fatalf("Apply of what the object already holds = %v, %v; want no write", written, err)
	}
	if n := h.writes.Count("patch", "statefulsets"); n != 4 {
		t.Errorf("%d patches, want 4 (one more refused create): %s", n, h.writes)
	}
}

func statefulSetWithReplicas(ns string, n int32) *appsv1.StatefulSet {
	s := statefulSet(ns)
	s.Spec.Replicas = ptr.To(n)
	return s
}

// TestApplyOverANameFreedInBetweenFailsAndTheNextApplyCreates: the apply
// that creates only was refused, the object was deleted before it could be
// looked up. Apply says so rather than writing blind, and the next
// reconcile's apply creates the child.
func TestApplyOverANameFreedInBetweenFailsAndTheNextApplyCreates(t *testing.T) {
	h := newHarness(t)
	refused := false
	racing := *h.applier
	racing.Client = interceptor.NewClient(h.applier.Client.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if !refused {
				refused = true
				return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "w", errors.New("the object has been modified"))
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	written, err := racing.Apply(t.Context(), statefulSet(h.ns), owner)
	if err == nil || written || !strings.Contains(err.Error(), "StatefulSet w") {
		t.Fatalf("Apply = %v, %v; want an error naming StatefulSet w and no write", written, err)
	}
	if n := h.writes.Total(); n != 0 {
		t.Errorf("%d writes reached the API server, want none: %s", n, h.writes)
	}
	if written, err := racing.Apply(t.Context(), statefulSet(h.ns), owner); err != nil || !written {
		t.Fatalf("the next Apply = %v, %v; want the child created", written, err)
	}
}
