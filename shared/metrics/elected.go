package metrics

import "github.com/prometheus/client_golang/prometheus"

// WhenElected is c reporting nothing until elected is closed (a manager's
// Elected()). A collector that counts from the manager's cache, as
// StalledCollector and CountCollector do, must not run on a standby:
// controller-runtime's cache starts an informer for any kind it is asked to
// list, so a cold standby's first scrape would make it hold and watch every
// object of those kinds, and wait for them to sync. Only the leader's count
// is wanted anyway: a standby's would count every object twice in a sum.
func WhenElected(c prometheus.Collector, elected <-chan struct{}) prometheus.Collector {
	return &electedCollector{Collector: c, elected: elected}
}

type electedCollector struct {
	prometheus.Collector
	elected <-chan struct{}
}

// Collect implements prometheus.Collector.
func (c *electedCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.elected:
		c.Collector.Collect(ch)
	default:
	}
}
