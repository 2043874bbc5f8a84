package util

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// Forwarder forwards localPort (0: any free port) to podPort of a pod until
// the connection to the pod ends or ctx is done. It sends the local port on
// ready once it listens.
type Forwarder func(ctx context.Context, s *kube.Session, pod *corev1.Pod, localPort, podPort int, ready chan<- int) error

// PortForward is kubectl port-forward's mechanism: the pod's portforward
// subresource through portForwardDialer (WebSocket, falling back to SPDY).
func PortForward(ctx context.Context, s *kube.Session, pod *corev1.Pod, localPort, podPort int, ready chan<- int) error {
	req := s.CS.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward")
	dialer, err := portForwardDialer(s.Cfg, req.URL())
	if err != nil {
		return err
	}
	stop, readyCh := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("%d:%d", localPort, podPort)}, stop, readyCh, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		defer close(stop)
		select {
		case <-ctx.Done():
			return
		case <-finished:
			return
		case <-readyCh:
		}
		if ports, err := fw.GetPorts(); err == nil && len(ports) == 1 {
			ready <- int(ports[0].Local)
		}
		select {
		case <-ctx.Done():
		case <-finished:
		}
	}()
	err = fw.ForwardPorts()
	if err == nil && ctx.Err() == nil {
		err = errors.New("the forward ended")
	}
	return kube.ExplainCore(err, "pods/portforward", "create", pod.Name, pod.Namespace)
}

// OpenBrowser opens link in the desktop's browser.
func OpenBrowser(link string) error {
	switch runtime.GOOS {
	case "darwin":
		return exec.Command("open", link).Start()
	case "windows":
		return exec.Command("rundll32", "url.dll,FileProtocolHandler", link).Start()
	default:
		return exec.Command("xdg-open", link).Start()
	}
}
