package featurestore

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/metrics"
)

// storeMetrics are the FeatureStore reconciler's own series, created by
// NewReconciler (a second manager in one process, as in tests, shares them).
type storeMetrics struct {
	provisioningDuration *prometheus.HistogramVec
}

func newMetrics() *storeMetrics {
	return &storeMetrics{
		provisioningDuration: metrics.NewHistogramVec("featurestore", "provisioning_duration_seconds",
			"Time to provision and verify one store in a shared server (ensure plus a login as the store's user).", nil, "store", "result"),
	}
}

// observeProvisioning records how long a store took, by outcome; nil
// metrics record nothing.
func (m *storeMetrics) observeProvisioning(store string, start time.Time, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.provisioningDuration.WithLabelValues(store, result).Observe(time.Since(start).Seconds())
}

// storesCollector reports the number of stores by kind and mode from the
// informer cache at scrape time, so the gauge is never stale and needs no
// bookkeeping on create and delete.
type storesCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

// RegisterStoresCollector registers mlplatform_featurestore_stores.
func RegisterStoresCollector(reader client.Reader) {
	c := &storesCollector{reader: reader, desc: prometheus.NewDesc(
		prometheus.BuildFQName(metrics.Namespace, "featurestore", "stores"),
		"Stores of every FeatureStore, by store (online, offline, registry) and mode (backend, managed).",
		[]string{"store", "mode"}, nil)}
	// A second manager in the same process (tests) finds it registered.
	_ = ctrlmetrics.Registry.Register(c)
}

func (c *storesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *storesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &featuresv1alpha1.FeatureStoreList{}
	if err := c.reader.List(ctx, list); err != nil {
		return
	}
	counts := map[[2]string]float64{}
	for _, s := range []string{"online", "offline", "registry"} {
		for _, m := range []string{"backend", "managed"} {
			counts[[2]string{s, m}] = 0
		}
	}
	for _, fs := range list.Items {
		for store, src := range map[string]featuresv1alpha1.StoreSource{
			"online": fs.Spec.OnlineStore, "offline": fs.Spec.OfflineStore, "registry": fs.Spec.Registry,
		} {
			mode := "backend"
			if src.Managed != nil {
				mode = "managed"
			}
			counts[[2]string{store, mode}]++
		}
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, k[0], k[1])
	}
}
