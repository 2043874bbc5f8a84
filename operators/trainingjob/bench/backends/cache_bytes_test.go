package backends

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/controller/trainingjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/kueue"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// cachedKinds are the kinds the TrainingJob operator caches one of per
// job, with objects of BenchmarkScale's fixture (testdata/cache: a queued,
// a running and a succeeded TrainingJob, their Jobs, their pods and a rank
// NetworkPolicy, as the API server served them, and a finished job with a
// user's spec) and the most each cached copy may keep, as a
// share of the object decoded with only its managed fields stripped.
// phase, when set, keeps only the pods in that phase, or not in it when
// it starts with "!". A kind whose objects the operator caches as metadata
// is compared with the typed object, whole.
var cachedKinds = []struct {
	name, file, phase string
	new               func() client.Object
	maxShare          float64
}{
	{"trainingjobs", "trainingjobs", "", func() client.Object { return &trainingv1alpha1.TrainingJob{} }, 0.92},
	{"jobs", "jobs", "", func() client.Object { return &batchv1.Job{} }, 0.40},
	{"pods", "pods", "!Succeeded", func() client.Object { return &corev1.Pod{} }, 0.50},
	// A pod that succeeded is cached as metadata only
	// (trainingjob.CacheFields, succeeded_pods.go).
	{"pods-succeeded", "pods", "Succeeded", podMetadata, 0.20},
	{"networkpolicies", "networkpolicies", "", func() client.Object { return &networkingv1.NetworkPolicy{} }, 0.75},
	// The fixture's succeeded job with what its jobs lack and a user's has:
	// a command, args, ten environment variables and a pod template of
	// volumes, tolerations and an affinity. Once it finished, its cached
	// copy keeps none of what its pods were built from.
	{"trainingjobs-user-spec", "trainingjobs-user-spec", "", func() client.Object { return &trainingv1alpha1.TrainingJob{} }, 0.60},
	// Kueue's Workloads of the fixture's queued and running Jobs, a
	// pending and an admitted one, as Kueue v0.17 makes them (its pod sets
	// copy the Jobs' pod templates), cached cluster-wide: the operator
	// reads only a label, a few spec fields and the conditions.
	{"workloads", "workloads", "", func() client.Object { return kueue.NewWorkload() }, 0.25},
}

func podMetadata() client.Object {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
}

// TestCacheKeepsLittleOfEachObject measures the heap one cached copy of
// each kind keeps in an informer's store, decoded as an informer decodes
// it, first with managed fields stripped only and then through the
// operator's cache transforms (shared/manager.CacheTransform: its slimming
// and the shared strings), and fails when a kind keeps more than its
// share. At 20 000 TrainingJobs every 100 bytes here is 2 MB per kind.
//
//	go test -run TestCacheKeepsLittleOfEachObject -v ./bench/backends/
func TestCacheKeepsLittleOfEachObject(t *testing.T) {
	opts := manager.Options{Transforms: trainingjob.CacheTransforms(), InternLabels: trainingjob.InternLabels()}
	for _, k := range cachedKinds {
		raws := readObjects(t, k.file, k.phase)
		wholeNew, transform := k.new, manager.CacheTransform(opts, k.new())
		if _, ok := k.new().(*metav1.PartialObjectMetadata); ok {
			wholeNew = func() client.Object { return &corev1.Pod{} }
			transform = manager.MetadataTransform(opts, trainingjob.SlimSucceededPod)
		}
		whole := cachedBytes(t, raws, wholeNew, cache.TransformStripManagedFields())
		cached := cachedBytes(t, raws, k.new, transform)
		t.Logf("%-12s %5.0f bytes per cached object with managed fields stripped, %5.0f through the operator's transforms (%.0f %%)", k.name, whole, cached, 100*cached/whole)
		if cached > k.maxShare*whole {
			t.Errorf("%s: a cached object keeps %.0f bytes, more than %.0f %% of %.0f", k.name, cached, 100*k.maxShare, whole)
		}
		if len(raws) == 1 {
			continue
		}
		for _, raw := range raws {
			one := []json.RawMessage{raw}
			var o struct {
				Metadata struct{ Name string }
				Status   struct{ Phase string }
			}
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatal(err)
			}
			t.Logf("  %s %s: %5.0f bytes, %5.0f through the transforms", o.Metadata.Name, o.Status.Phase,
				cachedBytes(t, one, wholeNew, cache.TransformStripManagedFields()), cachedBytes(t, one, k.new, transform))
		}
	}
}

// readObjects reads the objects of testdata/cache/<kind>.json, only those
// in phase when it is set (not in it when it starts with "!").
func readObjects(t *testing.T, kind, phase string) []json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cache", kind+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		t.Fatal(err)
	}
	if phase == "" {
		return raws
	}
	want, not := strings.CutPrefix(phase, "!")
	var out []json.RawMessage
	for _, raw := range raws {
		var o struct{ Status struct{ Phase string } }
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		if (o.Status.Phase == want) != not {
			out = append(out, raw)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no object of %s in phase %s", kind, phase)
	}
	return out
}

// cachedBytes stores copies of the objects, each decoded on its own and
// passed through transform, in an informer's indexer (the namespace index
// included) and returns the heap each copy keeps, after garbage
// collection.
func cachedBytes(t *testing.T, raws []json.RawMessage, newObj func() client.Object, transform toolscache.TransformFunc) float64 {
	t.Helper()
	const copies = 6000
	decoder := serializer.NewCodecFactory(harness.Scheme()).UniversalDeserializer()
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	before := liveHeapBytes()
	for i := range copies {
		obj := newObj()
		if meta, ok := obj.(*metav1.PartialObjectMetadata); ok {
			// As a metadata informer decodes it: the metadata alone.
			if err := json.Unmarshal(raws[i%len(raws)], meta); err != nil {
				t.Fatal(err)
			}
		} else if _, _, err := decoder.Decode(raws[i%len(raws)], nil, obj); err != nil {
			t.Fatal(err)
		}
		// Each copy its own name, as each job's objects have.
		obj.SetName(fmt.Sprintf("%s-%05d", obj.GetName(), i))
		out, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(out); err != nil {
			t.Fatal(err)
		}
	}
	after := liveHeapBytes()
	runtime.KeepAlive(store)
	return float64(after-before) / copies
}

func liveHeapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
