package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// DefaultConnectTimeout bounds the first contact with the cluster when
// --request-timeout is not given: long enough for a loaded apiserver to
// answer GET /version, short enough that a wrong context fails at once.
const DefaultConnectTimeout = 10 * time.Second

// probe asks the cluster for its version, which every user may read
// (system:public-info-viewer). Any answer from a server, an error status
// included, proves the cluster is reachable; only a transport failure or
// no answer in time is reported.
func probe(ctx context.Context, cfg *rest.Config, connectTimeout time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	timeout := connectTimeout
	if cfg.Timeout > 0 {
		timeout = cfg.Timeout
	}
	dc, err := discovery.NewDiscoveryClientForConfig(withoutTimeout(cfg))
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = dc.RESTClient().Get().AbsPath("/version").Do(pctx).Error()
	if err == nil || isServerAnswer(err) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if pctx.Err() != nil {
		return fmt.Errorf("cannot reach the cluster at %s: no answer within %s", cfg.Host, timeout)
	}
	return unreachableAt(cfg.Host, err)
}

// withoutTimeout copies cfg for the probe, whose bound is its context.
func withoutTimeout(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Timeout = 0
	return c
}

// isServerAnswer reports whether err carries an HTTP status from a server.
func isServerAnswer(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// unreachable rewrites a transport failure of any request (the cluster went
// away during a command) in the same words as the probe; it is nil for
// every other error.
func unreachable(err error) error {
	var ue *url.Error
	if err == nil || isServerAnswer(err) || !errors.As(err, &ue) {
		return nil
	}
	host := ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		host = u.Scheme + "://" + u.Host
	}
	return unreachableAt(host, err)
}

func unreachableAt(host string, err error) error {
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	return &userError{msg: fmt.Sprintf("cannot reach the cluster at %s: %v", host, cause), cause: err}
}
