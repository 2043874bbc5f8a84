package progress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/shared/manager"
)

// The keys of the endpoint's kubernetes.io/tls Secret.
const (
	secretCert = corev1.TLSCertKey
	secretKey  = corev1.TLSPrivateKeyKey
	secretCA   = "ca.crt"
)

// certificates is the endpoint's TLS material, read from one Secret of the
// operator's namespace through the API (never rendered by the chart, so
// that no client-side render can replace it). With generate, the operator
// owns that Secret: a replica that finds it missing creates it with a new
// CA and serving certificate, and one that finds it unusable replaces it;
// a usable Secret, such as the one an earlier chart generated, is kept as
// it is. Without generate the Secret is the admin's (cert-manager) and is
// only read. Every replica reads the same Secret, so all of them serve one
// certificate and inject one CA.
type certificates struct {
	key      types.NamespacedName
	names    []string
	generate bool
	// operator labels a Secret the operator creates as its own, which the
	// chart's owned-objects policy requires of every Secret it writes.
	operator string
	client   client.Client
	// reader reads the Secret from the API server, not from a cache, so
	// the operator needs no list or watch of Secrets.
	reader   client.Reader
	interval time.Duration
	log      logr.Logger
	current  atomic.Pointer[material]
}

// material is one parsed version of the Secret.
type material struct {
	cert  *tls.Certificate
	caPEM []byte
	pool  *x509.CertPool
}

// load reads the Secret, creating or repairing it when the operator owns
// it, and makes its material current when it changed.
func (c *certificates) load(ctx context.Context) error {
	m, err := c.ensure(ctx)
	if err != nil {
		return fmt.Errorf("the progress endpoint's Secret %s: %w", c.key, err)
	}
	if old := c.current.Load(); old != nil && bytes.Equal(old.caPEM, m.caPEM) && bytes.Equal(old.cert.Certificate[0], m.cert.Certificate[0]) {
		return nil
	}
	c.current.Store(m)
	c.log.Info("Loaded the progress endpoint's certificate", "secret", c.key.String(), "notAfter", m.cert.Leaf.NotAfter)
	return nil
}

// ensure returns the Secret's material. Replicas starting at once may
// race to create or repair it: the one that loses (AlreadyExists,
// Conflict) reads the winner's, so all end with the same CA.
func (c *certificates) ensure(ctx context.Context) (*material, error) {
	for range 3 {
		var s corev1.Secret
		err := c.reader.Get(ctx, c.key, &s)
		switch {
		case apierrors.IsNotFound(err) && c.generate:
			err = c.create(ctx)
		case err != nil:
			return nil, err
		default:
			m, invalid := c.parse(s.Data)
			if invalid == nil {
				return m, nil
			}
			if !c.generate {
				return nil, invalid
			}
			c.log.Info("Replacing the progress endpoint's unusable Secret", "secret", c.key.String(), "reason", invalid.Error())
			err = c.replace(ctx, &s)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return nil, err
		}
	}
	return nil, errors.New("it kept changing while this replica read it; retrying")
}

// create writes a new Secret with a new CA and certificate.
func (c *certificates) create(ctx context.Context) error {
	data, err := generateCertificates(c.names, time.Now())
	if err != nil {
		return err
	}
	return c.client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.key.Namespace, Name: c.key.Name, Labels: manager.ManagedByLabels(c.operator)},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	})
}

// replace writes new material into s, at the resourceVersion it was read
// with, so that of two replicas repairing it only one succeeds.
func (c *certificates) replace(ctx context.Context, s *corev1.Secret) error {
	data, err := generateCertificates(c.names, time.Now())
	if err != nil {
		return err
	}
	s.Data = data
	return c.client.Update(ctx, s)
}

// parse checks that data holds a key pair whose certificate the CA
// signed for the endpoint's name and that is valid now.
func (c *certificates) parse(data map[string][]byte) (*material, error) {
	cert, err := tls.X509KeyPair(data[secretCert], data[secretKey])
	if err != nil {
		return nil, err
	}
	caPEM := data[secretCA]
	if len(caPEM) > maxCAEnvLength {
		return nil, fmt.Errorf("%s is over %d bytes", secretCA, maxCAEnvLength)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", secretCA)
	}
	_, err = cert.Leaf.Verify(x509.VerifyOptions{DNSName: c.names[0], Roots: pool})
	if err != nil {
		return nil, fmt.Errorf("%s does not serve %s under %s: %w", secretCert, c.names[0], secretCA, err)
	}
	return &material{cert: &cert, caPEM: caPEM, pool: pool}, nil
}

// Start reads the Secret again every interval on every replica, so a
// rotation reaches all of them. A failed read keeps the material loaded
// last, which still serves.
func (c *certificates) Start(ctx context.Context) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.load(ctx); err != nil {
				c.log.Error(err, "Reloading the progress endpoint's certificate failed; serving the one loaded before")
			}
		}
	}
}

// NeedLeaderElection is false: every replica serves.
func (*certificates) NeedLeaderElection() bool { return false }

// GetCertificate is the certificate to serve and to present to the leader.
func (c *certificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.material().cert, nil
}

// CA is the PEM of the CA that signed the served certificate.
func (c *certificates) CA() string { return string(c.material().caPEM) }

// material is the current material; Setup loads it before anything runs.
func (c *certificates) material() *material { return c.current.Load() }
