package featurestore

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/metrics"
)

// StoreMetrics are the FeatureStore reconciler's own series, created by
// NewReconciler (a second manager in one process, as in tests, shares them).
type StoreMetrics struct {
	provisioningDuration *prometheus.HistogramVec
}

// NewStoreMetrics creates the reconciler's series.
func NewStoreMetrics() *StoreMetrics {
	return &StoreMetrics{
		provisioningDuration: metrics.NewHistogramVec("featurestore", "provisioning_duration_seconds",
			"Time to provision and verify one store in a shared server (ensure plus a login as the store's user).", nil, "store", "result"),
	}
}

// observeProvisioning records how long a store took, by outcome; nil
// metrics record nothing.
func (m *StoreMetrics) observeProvisioning(store string, start time.Time, err error) {
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

// RegisterStoresCollector registers mlplatform_featurestore_stores and
// mlplatform_featurestore_featurestores, replacing those of an earlier
// manager in the same process (tests), whose cache may be stopped.
func RegisterStoresCollector(reader client.Reader) error {
	if err := metrics.Replace(NewStoresCollector(reader)); err != nil {
		return err
	}
	return metrics.Replace(NewStateCollector(reader))
}

// NewStoresCollector counts the stores of the FeatureStores reader lists.
func NewStoresCollector(reader client.Reader) *storesCollector {
	return &storesCollector{reader: reader, desc: prometheus.NewDesc(
		prometheus.BuildFQName(metrics.Namespace, "featurestore", "stores"),
		"Stores of every FeatureStore, by store (online, offline, registry) and mode (backend, managed).",
		[]string{"store", "mode"}, nil)}
}

// statesMetric is the name of the scrape-time count of FeatureStores.
const statesMetric = "mlplatform_featurestore_featurestores"

// FeatureStore states as the metric reports them.
const (
	StateReady       = "Ready"
	StateProgressing = "Progressing"
	StateStalled     = "Stalled"
	StateDeleting    = "Deleting"
)

// NewStateCollector counts FeatureStores by namespace and state from
// reader at scrape time (see StateOf).
func NewStateCollector(reader client.Reader) *metrics.CountCollector {
	return metrics.NewCountCollector(reader, func() client.ObjectList { return &featuresv1alpha1.FeatureStoreList{} },
		statesMetric, "FeatureStores by namespace and state (Ready, Progressing, Stalled, Deleting).", []string{"namespace", "state"},
		func(o runtime.Object) []string {
			fs := o.(*featuresv1alpha1.FeatureStore)
			return []string{fs.Namespace, StateOf(fs)}
		})
}

// StateOf sums up a FeatureStore's conditions in one word: Deleting once
// it is being deleted, Stalled when only a person can help, Ready when
// Ready=True for its current generation, else Progressing.
func StateOf(fs *featuresv1alpha1.FeatureStore) string {
	switch {
	case fs.DeletionTimestamp != nil:
		return StateDeleting
	case conditions.IsTrue(fs, commonv1alpha1.ConditionStalled):
		return StateStalled
	case fs.Status.ObservedGeneration == fs.Generation && conditions.IsTrue(fs, commonv1alpha1.ConditionReady):
		return StateReady
	}
	return StateProgressing
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
