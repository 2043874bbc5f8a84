package tracing

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"k8s.io/client-go/rest"
)

// WrapTransport instruments every request made with cfg so that each
// Kubernetes API call becomes a client span, a child of the span in the
// request's context. Any transport wrapper already on cfg keeps running
// beneath the instrumentation, so its effects (auth, retries) are inside the
// measured call.
func WrapTransport(cfg *rest.Config, opts ...Option) {
	o := newOptions(opts)
	httpOpts := []otelhttp.Option{otelhttp.WithSpanNameFormatter(apiSpanName)}
	if o.tracerProvider != nil {
		httpOpts = append(httpOpts, otelhttp.WithTracerProvider(o.tracerProvider))
	}
	previous := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if previous != nil {
			rt = previous(rt)
		}
		return otelhttp.NewTransport(rt, httpOpts...)
	}
}

// apiSpanName names a span after the Kubernetes verb and resource, such as
// "k8s get pods" or "k8s patch trainingjobs/status". Object names and
// namespaces stay out of the name so that span names have low cardinality;
// the full URL is an attribute.
func apiSpanName(_ string, r *http.Request) string {
	verb, resource := apiVerbAndResource(r)
	if resource == "" {
		return "k8s " + r.Method
	}
	return "k8s " + verb + " " + resource
}

// apiVerbAndResource parses the REST paths that client-go builds:
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE]] and the same under
// /apis/GROUP/VERSION. Discovery and other paths yield an empty resource.
func apiVerbAndResource(r *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "", ""
	}
	// A namespace's own subresources share the shape of a namespaced
	// resource's path, so they are told apart the way the API server does.
	if len(rest) >= 3 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize" {
		rest = rest[2:]
	}
	resource = rest[0]
	hasName := len(rest) >= 2
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}

	switch r.Method {
	case http.MethodGet:
		switch {
		case hasName:
			verb = "get"
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		if hasName {
			verb = "delete"
		} else {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(r.Method)
	}
	return verb, resource
}
