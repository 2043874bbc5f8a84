package metrics

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// APIGroupSuffix marks the API groups of ml-platform's own kinds.
const APIGroupSuffix = ".mlplatform.dev"

// stalledListTimeout bounds one scrape's reads, so a cache that is still
// syncing never holds a scrape until Prometheus gives up on it.
const stalledListTimeout = 5 * time.Second

// StalledCollector exports mlplatform_objects_stalled{kind,namespace}: how
// many objects of the operator's own kinds have the kstatus condition
// Stalled=True. It counts from a reader (the manager's informer cache) at
// scrape time rather than keeping a gauge per object, so an object that
// recovered or was deleted never leaves a stale series behind.
type StalledCollector struct {
	reader client.Reader
	scheme *runtime.Scheme
	kinds  []schema.GroupVersionKind
	desc   *prometheus.Desc
}

var _ prometheus.Collector = (*StalledCollector)(nil)

// NewStalledCollector counts the kinds of the scheme whose API group ends
// in APIGroupSuffix and whose objects carry conditions. The reader must
// already watch those kinds (an operator's cache watches the kinds it
// reconciles once it leads); typed lists reuse those informers. On a
// manager's cache, register it through WhenElected.
func NewStalledCollector(reader client.Reader, scheme *runtime.Scheme) *StalledCollector {
	c := &StalledCollector{
		reader: reader,
		scheme: scheme,
		desc: prometheus.NewDesc(Namespace+"_objects_stalled",
			"Objects with the condition Stalled=True: they cannot make progress without a change from a person.",
			[]string{"kind", "namespace"}, nil),
	}
	for gvk := range scheme.AllKnownTypes() {
		if !strings.HasSuffix(gvk.Group, APIGroupSuffix) || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		obj, err := scheme.New(gvk)
		if err != nil {
			continue
		}
		if _, ok := obj.(interface{ GetConditions() []metav1.Condition }); !ok {
			continue
		}
		if _, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List")); err == nil {
			c.kinds = append(c.kinds, gvk)
		}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *StalledCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. A kind that cannot be listed is
// logged and left out of this scrape, so the other kinds still report.
func (c *StalledCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stalledListTimeout)
	defer cancel()
	for _, gvk := range c.kinds {
		counts, err := c.count(ctx, gvk)
		if err != nil {
			ctrl.Log.WithName("metrics").Error(err, "Counting Stalled objects failed", "kind", gvk.Kind)
			continue
		}
		for ns, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), gvk.Kind, ns)
		}
	}
}

func (c *StalledCollector) count(ctx context.Context, gvk schema.GroupVersionKind) (map[string]int, error) {
	obj, err := c.scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, err
	}
	list := obj.(client.ObjectList)
	if err := c.reader.List(ctx, list); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, item := range items {
		o, ok := item.(interface {
			GetConditions() []metav1.Condition
			GetNamespace() string
		})
		if ok && meta.IsStatusConditionTrue(o.GetConditions(), "Stalled") {
			counts[o.GetNamespace()]++
		}
	}
	return counts, nil
}
