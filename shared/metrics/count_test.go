package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func configMap(ns, name, phase string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"phase": phase}}
}

func phaseCounter(reader client.Reader, labelsOf func(runtime.Object) []string) *CountCollector {
	return NewCountCollector(reader, func() client.ObjectList { return &corev1.ConfigMapList{} },
		"mlplatform_counttest_objects", "Objects by phase.", []string{"namespace", "phase"}, labelsOf)
}

func byPhase(o runtime.Object) []string {
	cm := o.(*corev1.ConfigMap)
	return []string{cm.Namespace, cm.Data["phase"]}
}

// TestCountCollectorCountsByLabels counts at scrape time: an object that
// moves to another phase or is deleted leaves no series behind.
func TestCountCollectorCountsByLabels(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(
		configMap("a", "1", "Running"), configMap("a", "2", "Running"), configMap("a", "3", "Failed"),
		configMap("b", "1", "Running"),
	).Build()
	collector := phaseCounter(c, byPhase)
	want := `
# HELP mlplatform_counttest_objects Objects by phase.
# TYPE mlplatform_counttest_objects gauge
mlplatform_counttest_objects{namespace="a",phase="Failed"} 1
mlplatform_counttest_objects{namespace="a",phase="Running"} 2
mlplatform_counttest_objects{namespace="b",phase="Running"} 1
`
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	moved := configMap("a", "3", "Succeeded")
	if err := c.Update(t.Context(), moved); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), configMap("b", "1", "")); err != nil {
		t.Fatal(err)
	}
	want = `
# HELP mlplatform_counttest_objects Objects by phase.
# TYPE mlplatform_counttest_objects gauge
mlplatform_counttest_objects{namespace="a",phase="Running"} 2
mlplatform_counttest_objects{namespace="a",phase="Succeeded"} 1
`
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestCountCollectorSurvivesBadLabels: a label function that returns the
// wrong number of values is a programming error, but a scrape must not
// panic the process because of it.
func TestCountCollectorSurvivesBadLabels(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(configMap("a", "1", "Running")).Build()
	collector := phaseCounter(c, func(runtime.Object) []string { return []string{"only-one"} })
	if n := testutil.CollectAndCount(collector); n != 0 {
		t.Errorf("collected %d series from a broken label function, want 0", n)
	}
}

// TestReplaceDefinesAndKeepsTheNewest: Replace swaps a collector with the
// same descriptors for the newer one and records its name for the
// metric-name guard, as the constructors do.
func TestReplaceDefinesAndKeepsTheNewest(t *testing.T) {
	c1 := fake.NewClientBuilder().WithObjects(configMap("a", "1", "Old")).Build()
	c2 := fake.NewClientBuilder().WithObjects(configMap("a", "1", "New")).Build()
	first, second := phaseCounter(c1, byPhase), phaseCounter(c2, byPhase)
	for _, c := range []prometheus.Collector{first, second} {
		if err := Replace(c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unregister(c) })
	}
	if !slices.Contains(Defined(), "mlplatform_counttest_objects") {
		t.Errorf("Defined() = %v, lacks mlplatform_counttest_objects", Defined())
	}
	want := `
# HELP mlplatform_counttest_objects Objects by phase.
# TYPE mlplatform_counttest_objects gauge
mlplatform_counttest_objects{namespace="a",phase="New"} 1
`
	if err := testutil.GatherAndCompare(registry(), strings.NewReader(want), "mlplatform_counttest_objects"); err != nil {
		t.Error(err)
	}
	NewCounterVec("counttest", "vec_total", "A vector.", "l")
	t.Cleanup(func() { unregister(NewCounterVec("counttest", "vec_total", "A vector.", "l")) })
	if !slices.Contains(Defined(), "mlplatform_counttest_vec_total") {
		t.Errorf("Defined() = %v, lacks the vector mlplatform_counttest_vec_total", Defined())
	}
}
