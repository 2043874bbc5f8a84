package metrics

import (
	"errors"
	"regexp"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// defined holds the name of every metric registered through this package on
// controller-runtime's registry, so that a test can check each one is
// asserted by some test. A registry cannot list its collectors, and a
// vector without series is absent from Gather, hence this record.
var defined = struct {
	sync.Mutex
	names map[string]bool
}{names: map[string]bool{}}

// descName extracts fqName from a Desc's String form, the only place
// client_golang exposes it.
var descName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

func define(c prometheus.Collector) {
	names := Names(c)
	defined.Lock()
	defer defined.Unlock()
	for _, n := range names {
		defined.names[n] = true
	}
}

// Names returns the names of the metrics a collector describes.
func Names(c prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc, 8)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var out []string
	for d := range ch {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// Defined returns, sorted, the name of every metric registered through
// this package in this process: the vectors of NewCounterVec, NewGaugeVec
// and NewHistogramVec and the collectors of Replace.
func Defined() []string {
	defined.Lock()
	defer defined.Unlock()
	out := make([]string, 0, len(defined.names))
	for n := range defined.names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Replace registers a collector on controller-runtime's registry, replacing
// one with the same descriptors: a process that builds several managers
// (tests) keeps the newest one's, whose reader is the live one.
func Replace(c prometheus.Collector) error {
	err := ctrlmetrics.Registry.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		ctrlmetrics.Registry.Unregister(already.ExistingCollector)
		err = ctrlmetrics.Registry.Register(c)
	}
	if err == nil {
		define(c)
	}
	return err
}
