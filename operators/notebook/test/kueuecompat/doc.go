// Package kueuecompat runs the Notebook operator against the real Kueue
// v0.17 and its StatefulSet integration, beside the real kube-apiserver
// and the real StatefulSet controller.
package kueuecompat
