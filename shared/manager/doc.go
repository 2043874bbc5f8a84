// Package manager is the common main of every ml-platform operator: it turns flags into a controller-runtime manager with secured metrics, health probes, leader election, tracing and a label-restricted cache.
package manager
