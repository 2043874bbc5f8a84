package tracing

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// clearEndpointEnv makes a test independent of the environment it runs in,
// such as a CI job that exports an OTLP endpoint of its own.
func clearEndpointEnv(t *testing.T) {
	t.Helper()
	for _, name := range endpointEnvVars {
		t.Setenv(name, "")
	}
}

func TestSetupWithoutEndpointIsNoop(t *testing.T) {
	clearEndpointEnv(t)

	shutdown, err := Setup(context.Background(), "noop-test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "span")
	span.End()
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("span from the global provider is recorded although no endpoint is configured")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func TestSetupInstallsW3CPropagator(t *testing.T) {
	clearEndpointEnv(t)
	if _, err := Setup(context.Background(), "propagator-test"); err != nil {
		t.Fatal(err)
	}

	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1},
		SpanID:     trace.SpanID{2},
		TraceFlags: trace.FlagsSampled,
	})
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	want := "00-01000000000000000000000000000000-0200000000000000-01"
	if got := carrier.Get("traceparent"); got != want {
		t.Errorf("traceparent = %q, want %q", got, want)
	}
}

func TestSetupExportsToEndpoint(t *testing.T) {
	testCases := map[string]struct {
		envVar string
	}{
		"generic endpoint": {envVar: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		"traces endpoint":  {envVar: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			clearEndpointEnv(t)
			t.Setenv("OTEL_SERVICE_NAME", "")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
			collector := startCollector(t)
			// An http:// endpoint tells the exporter to dial without TLS.
			t.Setenv(tc.envVar, "http://"+collector.addr)

			shutdown, err := Setup(context.Background(), "export-test")
			if err != nil {
				t.Fatal(err)
			}
			_, span := otel.Tracer("test").Start(context.Background(), "exported span")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Shutdown flushes the batch processor, so the span has reached
			// the collector when it returns.
			if err := shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}

			spans := collector.spans()
			if len(spans) != 1 {
				t.Fatalf("collector received %d spans, want 1", len(spans))
			}
			got := spans[0]
			if got.span.GetName() != "exported span" {
				t.Errorf("span name = %q, want %q", got.span.GetName(), "exported span")
			}
			if v := got.resource["service.name"]; v != "export-test" {
				t.Errorf("resource service.name = %q, want %q", v, "export-test")
			}
			if v := got.resource["service.version"]; v == "" {
				t.Error("resource has no service.version")
			}
		})
	}
}

type receivedSpan struct {
	span     *tracepb.Span
	resource map[string]string
}

// fakeCollector is an OTLP gRPC trace receiver, so the test checks what an
// actual collector would get over the wire.
type fakeCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	addr string

	mu       sync.Mutex
	received []receivedSpan
}

func startCollector(t *testing.T) *fakeCollector {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeCollector{addr: lis.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return c
}

func (c *fakeCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		attrs := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.received = append(c.received, receivedSpan{span: s, resource: attrs})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *fakeCollector) spans() []receivedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]receivedSpan(nil), c.received...)
}
