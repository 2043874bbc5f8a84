// Package metrics creates Prometheus collectors named mlplatform_<subsystem>_<name> and registers them on controller-runtime's registry, so every operator exposes them on its secured metrics endpoint.
package metrics
