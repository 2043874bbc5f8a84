package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingCollector reports one series and counts how often it was asked.
type countingCollector struct {
	desc      *prometheus.Desc
	collected int
}

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	c.collected++
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
}

// TestWhenElectedCollectsOnlyOnceElected: before the election the wrapped
// collector is not even asked (its reads would start the standby's
// informers); after it, its series are reported.
func TestWhenElectedCollectsOnlyOnceElected(t *testing.T) {
	inner := &countingCollector{desc: prometheus.NewDesc("mlplatform_electedtest_objects", "Objects.", nil, nil)}
	elected := make(chan struct{})
	c := WhenElected(inner, elected)
	if n := testutil.CollectAndCount(c); n != 0 || inner.collected != 0 {
		t.Errorf("before the election: %d series, the collector asked %d times; want none", n, inner.collected)
	}
	close(elected)
	if n := testutil.CollectAndCount(c); n != 1 || inner.collected != 1 {
		t.Errorf("once elected: %d series, the collector asked %d times; want 1 and 1", n, inner.collected)
	}
	if got := Names(c); len(got) != 1 || got[0] != "mlplatform_electedtest_objects" {
		t.Errorf("described as %v, want the wrapped collector's metric", got)
	}
}
