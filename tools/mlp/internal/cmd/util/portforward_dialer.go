package util

import (
	"net/http"
	"net/url"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// portForwardWebsocketsEnv turns the WebSocket dialer off, as it does for
// kubectl port-forward; mlp honours kubectl's variable so one setting serves
// both tools behind a proxy that breaks WebSockets.
const portForwardWebsocketsEnv = "KUBECTL_PORT_FORWARD_WEBSOCKETS"

// portForwardDialer dials the pod's portforward subresource the way kubectl
// 1.31 and later do: SPDY tunnelled over a WebSocket first, because proxies
// and load balancers pass WebSockets but drop SPDY, and plain SPDY when the
// WebSocket upgrade is refused (an apiserver before 1.30, or one with the
// PortForwardWebsockets feature off) or an HTTPS proxy fails it.
func portForwardDialer(cfg *rest.Config, u *url.URL) (httpstream.Dialer, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	if strings.EqualFold(os.Getenv(portForwardWebsocketsEnv), "false") {
		return spdyDialer, nil
	}
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialer(wsDialer, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}
