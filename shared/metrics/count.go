package metrics

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountCollector exports a gauge of how many objects of one kind there
// are, by labels computed from each object (its namespace and phase, say).
// Like StalledCollector it counts from a reader at scrape time, so a phase
// no object is in any more leaves no stale series behind and nothing has
// to be kept in step on create and delete.
type CountCollector struct {
	reader   client.Reader
	newList  func() client.ObjectList
	labelsOf func(runtime.Object) []string
	desc     *prometheus.Desc
}

var _ prometheus.Collector = (*CountCollector)(nil)

// NewCountCollector counts the items newList lists by the label values
// labelsOf returns for each, one per labelNames. name is the full metric
// name.
func NewCountCollector(reader client.Reader, newList func() client.ObjectList, name, help string, labelNames []string, labelsOf func(runtime.Object) []string) *CountCollector {
	return &CountCollector{
		reader:   reader,
		newList:  newList,
		labelsOf: labelsOf,
		desc:     prometheus.NewDesc(name, help, labelNames, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *CountCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. A list that fails is logged and
// leaves the metric out of this scrape rather than reporting zeros.
func (c *CountCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stalledListTimeout)
	defer cancel()
	list := c.newList()
	if err := c.reader.List(ctx, list); err != nil {
		ctrl.Log.WithName("metrics").Error(err, "Counting objects failed", "metric", c.desc.String())
		return
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		ctrl.Log.WithName("metrics").Error(err, "Counting objects failed", "metric", c.desc.String())
		return
	}
	// The label values are joined with a byte no Kubernetes name or
	// phase contains, and split again when the metric is made.
	const sep = "\x00"
	counts := map[string]int{}
	for _, item := range items {
		counts[strings.Join(c.labelsOf(item), sep)]++
	}
	for key, n := range counts {
		m, err := prometheus.NewConstMetric(c.desc, prometheus.GaugeValue, float64(n), strings.Split(key, sep)...)
		if err != nil {
			ctrl.Log.WithName("metrics").Error(err, "Counting objects failed", "metric", c.desc.String())
			return
		}
		ch <- m
	}
}
