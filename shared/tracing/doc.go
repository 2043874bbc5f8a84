// Package tracing sets up OpenTelemetry for an operator and instruments its reconcilers and its Kubernetes API client, so that one reconcile and the API calls it makes form one trace.
package tracing
