package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// AttributeObjectName holds the name of the reconciled object. OpenTelemetry
// has per-kind name attributes (k8s.pod.name, k8s.job.name) but none for an
// arbitrary kind such as a custom resource.
const AttributeObjectName = attribute.Key("k8s.object.name")

// Reconciler wraps r so that every reconcile runs in its own span, named
// "Reconcile <name>" and carrying the request's namespace and name. The
// span's context is passed to r, so API calls made through a client whose
// transport went through WrapTransport become its children, and r's logger
// carries the trace ID so logs and traces can be joined.
func Reconciler(name string, r reconcile.Reconciler, opts ...Option) reconcile.Reconciler {
	return &tracingReconciler{name: name, next: r, options: newOptions(opts)}
}

type tracingReconciler struct {
	name string
	next reconcile.Reconciler
	options
}

func (r *tracingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx, span := r.provider().Tracer(scopeName).Start(ctx, "Reconcile "+r.name,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			semconv.K8SNamespaceName(req.Namespace),
			AttributeObjectName.String(req.Name),
		),
	)
	defer span.End()

	if sc := span.SpanContext(); sc.IsValid() {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("traceID", sc.TraceID().String()))
	}

	result, err := r.next.Reconcile(ctx, req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return result, err
	}
	if result.RequeueAfter > 0 {
		span.SetAttributes(attribute.String("reconcile.requeue_after", result.RequeueAfter.String()))
	}
	return result, nil
}
