package tracing

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func newRecorder(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exporter, tp
}

func attributes(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

func TestReconcilerRecordsSpan(t *testing.T) {
	testCases := map[string]struct {
		result         reconcile.Result
		err            error
		wantStatus     codes.Code
		wantAttributes map[string]string
		wantEvents     []string
	}{
		"success": {
			wantStatus: codes.Unset,
			wantAttributes: map[string]string{
				"k8s.namespace.name": "team-a",
				"k8s.object.name":    "job-1",
			},
		},
		"requeue after": {
			result:     reconcile.Result{RequeueAfter: time.Minute},
			wantStatus: codes.Unset,
			wantAttributes: map[string]string{
				"k8s.namespace.name":      "team-a",
				"k8s.object.name":         "job-1",
				"reconcile.requeue_after": "1m0s",
			},
		},
		"error": {
			err:        errors.New("pytorchjob rejected"),
			wantStatus: codes.Error,
			wantAttributes: map[string]string{
				"k8s.namespace.name": "team-a",
				"k8s.object.name":    "job-1",
			},
			wantEvents: []string{"exception"},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			exporter, tp := newRecorder(t)
			inner := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
				return tc.result, tc.err
			})
			r := Reconciler("trainingjob", inner, WithTracerProvider(tp))

			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "job-1"}}
			result, err := r.Reconcile(context.Background(), req)
			if !errors.Is(err, tc.err) || result != tc.result {
				t.Fatalf("Reconcile() = %v, %v; want the inner reconciler's %v, %v", result, err, tc.result, tc.err)
			}

			spans := exporter.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("recorded %d spans, want 1", len(spans))
			}
			span := spans[0]
			if span.Name != "Reconcile trainingjob" {
				t.Errorf("span name = %q, want %q", span.Name, "Reconcile trainingjob")
			}
			if diff := cmp.Diff(tc.wantAttributes, attributes(span.Attributes)); diff != "" {
				t.Errorf("span attributes (-want +got):\n%s", diff)
			}
			if span.Status.Code != tc.wantStatus {
				t.Errorf("span status = %v, want %v", span.Status.Code, tc.wantStatus)
			}
			if tc.err != nil && span.Status.Description != tc.err.Error() {
				t.Errorf("span status description = %q, want %q", span.Status.Description, tc.err.Error())
			}
			var events []string
			for _, e := range span.Events {
				events = append(events, e.Name)
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("span events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcilerUsesGlobalProviderAtCallTime(t *testing.T) {
	exporter, tp := newRecorder(t)
	r := Reconciler("late", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}))
	// The provider is installed after the reconciler was built, as Main
	// does when tracing is set up after the reconcilers are registered.
	setGlobalProvider(t, tp)

	if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := len(exporter.GetSpans()); got != 1 {
		t.Errorf("recorded %d spans through the global provider, want 1", got)
	}
}

func TestAPICallInsideReconcileIsChildSpan(t *testing.T) {
	exporter, tp := newRecorder(t)

	var sawInnerWrapper atomic.Bool
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawInnerWrapper.Store(r.Header.Get("X-Inner-Wrapper") == "yes")
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/team-a/configmaps/settings" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"team-a"}}`))
	}))
	defer apiserver.Close()

	cfg := &rest.Config{Host: apiserver.URL}
	// A wrapper that is already on the config, such as one added by an
	// auth plugin, must keep working after instrumentation.
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Inner-Wrapper", "yes")
			return rt.RoundTrip(r)
		})
	}
	WrapTransport(cfg, WithTracerProvider(tp))
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	r := Reconciler("settings", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		_, err := clientset.CoreV1().ConfigMaps(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
		return reconcile.Result{}, err
	}), WithTracerProvider(tp))
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "settings"}}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if !sawInnerWrapper.Load() {
		t.Error("the transport wrapper that was on the config before WrapTransport did not run")
	}

	spans := exporter.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	parent, ok := byName["Reconcile settings"]
	if !ok {
		t.Fatalf("no reconcile span among %v", spanNames(spans))
	}
	child, ok := byName["k8s get configmaps"]
	if !ok {
		t.Fatalf("no API client span among %v", spanNames(spans))
	}
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("API span's parent = %v in trace %v, want the reconcile span %v in trace %v",
			child.Parent.SpanID(), child.SpanContext.TraceID(), parent.SpanContext.SpanID(), parent.SpanContext.TraceID())
	}
	if got := attributes(child.Attributes)["http.response.status_code"]; got != "200" {
		t.Errorf("API span http.response.status_code = %q, want 200 (attributes %v)", got, attributes(child.Attributes))
	}
}

func TestAPISpanName(t *testing.T) {
	testCases := map[string]struct {
		method string
		url    string
		want   string
	}{
		"get core":                {http.MethodGet, "/api/v1/namespaces/ns/pods/p", "k8s get pods"},
		"list namespaced":         {http.MethodGet, "/api/v1/namespaces/ns/pods", "k8s list pods"},
		"list cluster-wide":       {http.MethodGet, "/api/v1/pods?limit=500", "k8s list pods"},
		"watch":                   {http.MethodGet, "/apis/apps/v1/namespaces/ns/deployments?watch=true", "k8s watch deployments"},
		"create group":            {http.MethodPost, "/apis/mlplatform.dev/v1alpha1/namespaces/ns/trainingjobs", "k8s create trainingjobs"},
		"patch status":            {http.MethodPatch, "/apis/mlplatform.dev/v1alpha1/namespaces/ns/trainingjobs/j/status", "k8s patch trainingjobs/status"},
		"update":                  {http.MethodPut, "/api/v1/namespaces/ns/configmaps/c", "k8s update configmaps"},
		"delete":                  {http.MethodDelete, "/api/v1/namespaces/ns/secrets/s", "k8s delete secrets"},
		"delete collection":       {http.MethodDelete, "/api/v1/namespaces/ns/secrets", "k8s deletecollection secrets"},
		"cluster-scoped get":      {http.MethodGet, "/api/v1/nodes/n1", "k8s get nodes"},
		"get namespace":           {http.MethodGet, "/api/v1/namespaces/ns", "k8s get namespaces"},
		"namespace subresource":   {http.MethodPut, "/api/v1/namespaces/ns/finalize", "k8s update namespaces/finalize"},
		"service account token":   {http.MethodPost, "/api/v1/namespaces/ns/serviceaccounts/sa/token", "k8s create serviceaccounts/token"},
		"core discovery":          {http.MethodGet, "/api/v1", "k8s GET"},
		"group version discovery": {http.MethodGet, "/apis/apps/v1", "k8s GET"},
		"version":                 {http.MethodGet, "/version", "k8s GET"},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.url, nil)
			if got := apiSpanName("", req); got != tc.want {
				t.Errorf("apiSpanName(%s %s) = %q, want %q", tc.method, tc.url, got, tc.want)
			}
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}

func setGlobalProvider(t *testing.T, tp trace.TracerProvider) {
	t.Helper()
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(previous) })
}

func TestReconcilerAddsTraceIDToLogger(t *testing.T) {
	exporter, tp := newRecorder(t)
	var logged []string
	logger := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})

	r := Reconciler("logging", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		log.FromContext(ctx).Info("reconciling")
		return reconcile.Result{}, nil
	}), WithTracerProvider(tp))
	if _, err := r.Reconcile(log.IntoContext(context.Background(), logger), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}

	spans := exporter.GetSpans()
	if len(spans) != 1 || len(logged) != 1 {
		t.Fatalf("got %d spans and %d log lines, want 1 each", len(spans), len(logged))
	}
	want := `"traceID"="` + spans[0].SpanContext.TraceID().String() + `"`
	if !strings.Contains(logged[0], want) {
		t.Errorf("log line %s lacks %s", logged[0], want)
	}
}
