package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace/noop"
)

// endpointEnvVars are the variables the OTLP exporter reads its endpoint
// from. An operator exports spans only when one of them is set, because
// dialling a default collector that nobody deployed would only produce
// export errors in the logs.
var endpointEnvVars = []string{
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
}

// Setup installs the global W3C trace-context propagator and a global
// TracerProvider. With an OTLP endpoint in the environment the provider
// batches spans to it over gRPC, and the exporter itself reads the remaining
// OTEL_EXPORTER_OTLP_* settings (TLS, headers, timeouts); without one the
// provider is a no-op and nothing is dialled. The returned shutdown flushes
// buffered spans and must be called before the process exits.
func Setup(ctx context.Context, serviceName string) (shutdown func(context.Context) error, err error) {
	// The propagator is set even without an exporter so that trace context
	// coming from a caller still reaches the API server's own traces.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	if !exporterConfigured() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return func(context.Context) error { return nil }, nil
	}

	exporter, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(serviceName), semconv.ServiceVersion(serviceVersion())),
		// Environment attributes come last so that OTEL_SERVICE_NAME and
		// OTEL_RESOURCE_ATTRIBUTES can override what the binary declares.
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("building trace resource: %w", err), exporter.Shutdown(ctx))
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
	)
	otel.SetTracerProvider(provider)
	return provider.Shutdown, nil
}

func exporterConfigured() bool {
	for _, name := range endpointEnvVars {
		if os.Getenv(name) != "" {
			return true
		}
	}
	return false
}

// serviceVersion reports the module version of the binary, or its VCS
// revision for development builds, so that spans tell which build emitted
// them without a version variable to set at link time.
func serviceVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			return s.Value
		}
	}
	return "unknown"
}
