package util

import (
	"context"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// LogOpener opens the log of a pod's container.
type LogOpener func(ctx context.Context, s *kube.Session, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error)

// APILogs reads a container's log through the API server, as kubectl logs
// does.
func APILogs(ctx context.Context, s *kube.Session, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	r, err := s.CS.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return nil, kube.ExplainCore(err, "pods/log", "get", pod.Name, pod.Namespace)
	}
	return r, nil
}
