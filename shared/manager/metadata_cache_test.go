package manager

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestFieldsSplitAKindBetweenItsCacheAndAMetadataCache: Options.Fields
// keeps the pods that succeeded out of the pods' cache, NewMetadataCache
// holds their metadata (the operator's pods only, slimmed by its
// transform), and a pod that succeeds moves from one to the other.
func TestFieldsSplitAKindBetweenItsCacheAndAMetadataCache(t *testing.T) {
	cs := adminClientset(t)
	ns := createNamespace(t, cs, "metadata-cache")
	const name = "metadata-cache-test-operator"
	podMeta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	succeeded := fields.OneTermEqualSelector("status.phase", string(corev1.PodSucceeded))

	newPod := func(podName string, labels map[string]string, phase corev1.PodPhase) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns, Labels: labels, Annotations: map[string]string{"note": "dropped"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		created, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Phase = phase
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	newPod("running", ManagedByLabels(name), corev1.PodRunning)
	newPod("succeeded", ManagedByLabels(name), corev1.PodSucceeded)
	newPod("failed", ManagedByLabels(name), corev1.PodFailed)
	newPod("someone-elses-succeeded", ManagedByLabels("another-operator"), corev1.PodSucceeded)

	opts := Options{
		Name: name, OwnedObjects: []client.Object{&corev1.Pod{}},
		Fields: map[client.Object]fields.Selector{&corev1.Pod{}: fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded))},
	}
	var meta cache.Cache
	opts.Setup = func(mgr ctrl.Manager, _ Config) error {
		c, err := NewMetadataCache(mgr, opts, nil, podMeta, succeeded, func(in any) (any, error) {
			in.(*metav1.PartialObjectMetadata).Annotations = nil
			return in, nil
		})
		meta = c
		return err
	}
	mgr, err := New(testConfig(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	if !mgr.GetCache().WaitForCacheSync(t.Context()) || !meta.WaitForCacheSync(t.Context()) {
		t.Fatal("the caches did not start")
	}

	cachedPods := func(ctx context.Context) ([]string, error) {
		var pods corev1.PodList
		if err := mgr.GetClient().List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []string
		for _, p := range pods.Items {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out, nil
	}
	cachedMeta := func(ctx context.Context) ([]string, error) {
		list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
		if err := meta.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []string
		for _, p := range list.Items {
			if len(p.ManagedFields) != 0 || p.Annotations != nil {
				t.Errorf("the metadata cache keeps pod %s's managed fields or annotations: %v", p.Name, p.Annotations)
			}
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out, nil
	}
	wantBoth := func(what string, pods, metas []string) {
		t.Helper()
		eventually(t, what, func(ctx context.Context) (bool, error) {
			gotPods, err := cachedPods(ctx)
			if err != nil {
				return false, err
			}
			gotMeta, err := cachedMeta(ctx)
			if err != nil {
				return false, err
			}
			if !slices.Equal(gotPods, pods) || !slices.Equal(gotMeta, metas) {
				t.Logf("pods cached %v, as metadata %v", gotPods, gotMeta)
				return false, nil
			}
			return true, nil
		})
	}
	wantBoth("the pods that did not succeed cached, the one that did as metadata", []string{"failed", "running"}, []string{"succeeded"})

	running, err := cs.CoreV1().Pods(ns).Get(t.Context(), "running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running.Status.Phase = corev1.PodSucceeded
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantBoth("a pod that succeeded moved to the metadata cache", []string{"failed"}, []string{"running", "succeeded"})
}
