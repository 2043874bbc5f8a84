package manager

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ml-platform/ml-platform/shared/tracing"
)

func TestReconcileAndItsAPICallsFormOneTrace(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	previous := otel.GetTracerProvider()
	// New wraps the API client's transport with the global provider, as
	// Main does after tracing.Setup.
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(previous)
		_ = tp.Shutdown(context.Background())
	})

	cs := adminClientset(t)
	ns := createNamespace(t, cs, "tracing")
	const name = "tracing-test-operator"
	mgr, err := New(testConfig(t), Options{
		Name:         name,
		OwnedObjects: []client.Object{&corev1.ConfigMap{}},
		Setup: func(mgr ctrl.Manager, cfg Config) error {
			reader := mgr.GetAPIReader()
			r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				var cm corev1.ConfigMap
				return reconcile.Result{}, client.IgnoreNotFound(reader.Get(ctx, req.NamespacedName, &cm))
			})
			controllerOptions := cfg.ControllerOptions()
			// Controller names are unique per process, and -count reruns
			// this test in the same process.
			controllerOptions.SkipNameValidation = ptr.To(true)
			return ctrl.NewControllerManagedBy(mgr).
				Named("tracedconfigmap").
				For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
					return o.GetNamespace() == ns
				}))).
				WithOptions(controllerOptions).
				Complete(tracing.Reconciler("configmap", r))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "traced", Namespace: ns, Labels: ManagedByLabels(name)}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var reconcileSpan, apiSpan tracetest.SpanStub
	eventually(t, "a reconcile span with a child API span", func(context.Context) (bool, error) {
		spans := exporter.GetSpans()
		for _, s := range spans {
			attrs := map[string]string{}
			for _, kv := range s.Attributes {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			if s.Name == "Reconcile configmap" && attrs["k8s.namespace.name"] == ns && attrs["k8s.object.name"] == "traced" {
				reconcileSpan = s
			}
		}
		if !reconcileSpan.SpanContext.IsValid() {
			return false, nil
		}
		for _, s := range spans {
			if s.Parent.SpanID() == reconcileSpan.SpanContext.SpanID() {
				apiSpan = s
				return true, nil
			}
		}
		return false, nil
	})
	if apiSpan.Name != "k8s get configmaps" {
		t.Errorf("child span of the reconcile = %q, want %q", apiSpan.Name, "k8s get configmaps")
	}
	if apiSpan.SpanContext.TraceID() != reconcileSpan.SpanContext.TraceID() {
		t.Error("API span is not in the reconcile's trace")
	}
}
