package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestIsUnreachable(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	testCases := map[string]struct {
		err  error
		want bool
	}{
		"connection refused":  {err: refused, want: true},
		"wrapped refusal":     {err: fmt.Errorf("listing: %w", refused), want: true},
		"connection reset":    {err: &url.Error{Op: "Get", Err: syscall.ECONNRESET}, want: true},
		"EOF":                 {err: &url.Error{Op: "Get", Err: io.EOF}, want: true},
		"service unavailable": {err: apierrors.NewServiceUnavailable("starting"), want: true},
		"not found":           {err: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x"), want: false},
		"forbidden":           {err: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("no")), want: false},
		"context canceled":    {err: &url.Error{Op: "Get", Err: context.Canceled}, want: false},
		"deadline exceeded":   {err: context.DeadlineExceeded, want: false},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			if got := isUnreachable(tc.err); got != tc.want {
				t.Errorf("isUnreachable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestFailuresDuringAnOutageDoNotGrowTheBackoff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.apiServer = &apiServerHealth{}
	limiter := cfg.ControllerOptions().RateLimiter
	item := reconcile.Request{}
	item.Name = "failing"

	// Two failures before the outage: 5ms, then 10ms.
	limiter.When(item)
	limiter.When(item)
	cfg.apiServer.unreachable.Store(true)
	for range 50 {
		if d := limiter.When(item); d < unreachableRetryMax || d > unreachableRetryMax*3/2 {
			t.Fatalf("delay while the API server is unreachable = %v, want %v plus up to half of it", d, unreachableRetryMax)
		}
	}
	cfg.apiServer.unreachable.Store(false)
	// The count continues where the outage found it: a third failure.
	if d := limiter.When(item); d != 20*time.Millisecond {
		t.Errorf("delay after the outage = %v, want 20ms (the third failure's)", d)
	}
}
