package patch

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// laggingCache is an informer cache that has not seen the latest writes:
// it serves the object as it was when snap was last called.
type laggingCache struct {
	live client.Client
	obj  client.Object
}

func (c *laggingCache) snap(t *testing.T, key client.ObjectKey) {
	t.Helper()
	c.obj = &corev1.Pod{}
	if err := c.live.Get(context.Background(), key, c.obj); err != nil {
		t.Fatal(err)
	}
}

func (c *laggingCache) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.obj.(*corev1.Pod).DeepCopyInto(obj.(*corev1.Pod))
	return nil
}

func (c *laggingCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	panic("not used")
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

func readyOf(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

func setReady(p *corev1.Pod, s corev1.ConditionStatus) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
}

func TestGetDoesNotReturnAVersionThisProcessReplaced(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID(t.Name())}}
	setReady(pod, corev1.ConditionTrue)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod).WithStatusSubresource(pod).Build()
	key := client.ObjectKeyFromObject(pod)
	cache := &laggingCache{live: c}
	cache.snap(t, key)
	live := &countingReader{Reader: c}

	// A reconcile writes Ready=False.
	got := &corev1.Pod{}
	if err := Get(ctx, cache, live, key, got); err != nil {
		t.Fatal(err)
	}
	if live.gets != 0 {
		t.Fatalf("a read with no write of this process behind it went to the API server")
	}
	h, err := NewHelper(got, c, live)
	if err != nil {
		t.Fatal(err)
	}
	setReady(got, corev1.ConditionFalse)
	if res, err := h.Patch(ctx, got); err != nil || !res.StatusPatched {
		t.Fatalf("Patch = %+v, %v", res, err)
	}

	// The next reconcile starts before the cache has seen that write: it
	// must compute from the written version, not from Ready=True.
	next := &corev1.Pod{}
	if err := Get(ctx, cache, live, key, next); err != nil {
		t.Fatal(err)
	}
	if readyOf(next) != corev1.ConditionFalse || next.ResourceVersion != got.ResourceVersion {
		t.Fatalf("Get returned Ready=%s at resourceVersion %s, the cache's stale version; want the written %s", readyOf(next), next.ResourceVersion, got.ResourceVersion)
	}
	if live.gets != 1 {
		t.Fatalf("the stale read cost %d API server reads, want 1", live.gets)
	}

	// Once the cache has caught up, reads come from it again.
	cache.snap(t, key)
	if err := Get(ctx, cache, live, key, next); err != nil {
		t.Fatal(err)
	}
	if live.gets != 1 {
		t.Fatalf("a read from a cache that caught up went to the API server")
	}
}

func TestWriteLogOrdersResourceVersions(t *testing.T) {
	l := &writeLog{entries: map[types.UID]*written{}}
	l.record("a", []string{"10"}, "12")
	if !l.stale("a", "11") || !l.stale("a", "10") {
		t.Error("versions before the written 12 are not stale")
	}
	if l.stale("a", "13") {
		t.Error("a version after the write (another writer's) is stale")
	}
	if l.stale("a", "11") {
		t.Error("the entry outlived a read that showed the cache caught up")
	}

	// resourceVersions that are not integers: only those the process saw
	// replaced are known to be older, including an earlier write's own.
	l.record("b", []string{"x"}, "y")
	l.record("b", []string{"y"}, "z")
	if !l.stale("b", "x") || !l.stale("b", "y") {
		t.Error("versions replaced by this process's writes are not stale")
	}
	if l.stale("b", "z") || l.stale("b", "x") {
		t.Error("the written version is stale, or the entry outlived it")
	}
	if l.stale("c", "1") {
		t.Error("an object never written is stale")
	}
}
