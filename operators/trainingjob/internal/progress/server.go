package progress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// server serves the endpoint over TLS on every replica.
type server struct {
	addr    string
	handler http.Handler
	certs   *certificates
	log     logr.Logger
	errors  *connectionErrors
}

// NeedLeaderElection is false: every replica behind the Service answers.
func (*server) NeedLeaderElection() bool { return false }

func (s *server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("progress endpoint: %w", err)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          s.errors.logger(),
		// HTTP/2 stays off, as on the metrics endpoint (rapid reset).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: s.certs.GetCertificate,
			NextProtos:     []string{"http/1.1"},
			// A replica passing a report on presents the endpoint's own
			// certificate (fromReplica); training pods present none.
			ClientAuth: tls.RequestClientCert,
		},
	}
	go s.errors.run(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	s.log.Info("Serving progress reports", "address", ln.Addr().String())
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// leaderRecord publishes and finds the leading replica's address in a
// Lease of the operator's namespace: the leader writes it once when it
// starts leading, the other replicas read it when they pass a report on.
type leaderRecord struct {
	key     types.NamespacedName
	self    string
	log     logr.Logger
	client  client.Client
	live    client.Reader
	mu      sync.Mutex
	cached  string
	readAt  time.Time
	maxAged time.Duration
}

// NeedLeaderElection: only the leader publishes.
func (*leaderRecord) NeedLeaderElection() bool { return true }

func (l *leaderRecord) Start(ctx context.Context) error {
	// A failed write is retried: returning an error would stop the
	// whole operator, and only the standbys' forwarding waits for it.
	for {
		err := l.publish(ctx)
		if err == nil {
			break
		}
		l.log.Error(err, "Publishing the progress endpoint's leader address failed; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	<-ctx.Done()
	return nil
}

// publish records this replica's address in the Lease.
func (l *leaderRecord) publish(ctx context.Context) error {
	var lease coordinationv1.Lease
	err := l.live.Get(ctx, l.key, &lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.key.Namespace, Name: l.key.Name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.self)},
		}
		return l.client.Create(ctx, &lease)
	case err != nil:
		return err
	case ptr.Deref(lease.Spec.HolderIdentity, "") != l.self:
		lease.Spec.HolderIdentity = ptr.To(l.self)
		return l.client.Update(ctx, &lease)
	}
	return nil
}

// address is the leader's published address, read at most every maxAged.
func (l *leaderRecord) address(ctx context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cached != "" && time.Since(l.readAt) < l.maxAged {
		return l.cached, nil
	}
	var lease coordinationv1.Lease
	if err := l.live.Get(ctx, l.key, &lease); err != nil {
		return "", err
	}
	addr := ptr.Deref(lease.Spec.HolderIdentity, "")
	if addr == "" || addr == l.self {
		return "", errors.New("no leader address published yet")
	}
	l.cached, l.readAt = addr, time.Now()
	return addr, nil
}

// forwarder passes a report on to the leader over TLS, verifying the
// leader's certificate (the same one every replica serves) for the
// Service's name against the CA of the Secret as last loaded, so that a
// rotated CA does not cut the standbys off.
type forwarder struct {
	leader     *leaderRecord
	certs      *certificates
	serverName string

	mu      sync.Mutex
	trusted *material
	http    *http.Client
}

// client is an HTTP client trusting the current CA, made anew when the
// Secret's material changed.
func (f *forwarder) client() *http.Client {
	m := f.certs.material()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.trusted == m {
		return f.http
	}
	if f.http != nil {
		f.http.CloseIdleConnections()
	}
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12, RootCAs: m.pool, ServerName: f.serverName,
			// The endpoint's own certificate proves to the leader that
			// this is a replica, whose callers were rate-limited here.
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return f.certs.GetCertificate(nil)
			},
		},
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 4,
	}
	f.trusted, f.http = m, &http.Client{Transport: transport, Timeout: 15 * time.Second}
	return f.http
}

func (f *forwarder) forward(ctx context.Context, r *http.Request, body []byte) (*http.Response, error) {
	addr, err := f.leader.address(ctx)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+r.URL.EscapedPath(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"Authorization", "Content-Type"} {
		req.Header.Set(k, r.Header.Get(k))
	}
	req.Header.Set(headerForwarded, "1")
	resp, err := f.client().Do(req)
	if err != nil {
		// The leader may have changed: read the record again next time.
		f.leader.mu.Lock()
		f.leader.cached = ""
		f.leader.mu.Unlock()
	}
	return resp, err
}

// replicaCheck says whether a request's TLS client proved it holds the
// endpoint's own key: it presented the very certificate this replica
// serves, which only the operator's replicas have (the handshake proves
// possession of its key). During a certificate renewal the two may differ
// for a moment; the request is then limited by its source like any other.
func replicaCheck(certs *certificates) func(r *http.Request) bool {
	return func(r *http.Request) bool {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return false
		}
		own, err := certs.GetCertificate(nil)
		if err != nil || own == nil || len(own.Certificate) == 0 {
			return false
		}
		return bytes.Equal(r.TLS.PeerCertificates[0].Raw, own.Certificate[0])
	}
}
