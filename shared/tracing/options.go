package tracing

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// scopeName identifies this package as the instrumentation scope of the
// spans it creates.
const scopeName = "github.com/ml-platform/ml-platform/shared/tracing"

// Option configures the instrumentation in this package.
type Option func(*options)

type options struct {
	tracerProvider trace.TracerProvider
}

// WithTracerProvider makes the instrumentation use tp instead of the global
// provider. Tests use it to record spans in memory without touching global
// state that other tests in the binary share.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// provider resolves the global provider on every call rather than once at
// construction, so a reconciler built before Setup still reports to the
// provider that Setup installs.
func (o options) provider() trace.TracerProvider {
	if o.tracerProvider != nil {
		return o.tracerProvider
	}
	return otel.GetTracerProvider()
}
