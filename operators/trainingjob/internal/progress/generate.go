package progress

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"time"

	"github.com/ml-platform/ml-platform/shared/selfsigned"
)

// certificateLifetime is that of the generated CA and certificate, as the
// chart generated them before: long enough never to expire under a
// running operator; an expired one is replaced like any unusable one.
const certificateLifetime = 10 * 365 * 24 * time.Hour

// generateCertificates makes a self-signed CA and a serving certificate it
// signs for names, as the data of a kubernetes.io/tls Secret.
func generateCertificates(names []string, now time.Time) (map[string][]byte, error) {
	leaf := x509.Certificate{
		Subject:  pkix.Name{CommonName: names[0]},
		KeyUsage: x509.KeyUsageDigitalSignature,
		// Replicas also present it to the leader as their client certificate.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, n)
		}
	}
	p, err := selfsigned.Issue(names[0]+" CA", leaf, now, certificateLifetime)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{secretCert: p.Cert, secretKey: p.Key, secretCA: p.CA}, nil
}

// certificateNames are the names a certificate for the endpoint's host
// serves: a Service's host <service>.<namespace>.svc also under its
// shorter and its fully qualified forms, as the chart's used to.
func certificateNames(host string) []string {
	service, ok := strings.CutSuffix(host, ".svc")
	if !ok {
		return []string{host}
	}
	short, _, _ := strings.Cut(service, ".")
	return []string{host, short, service, host + ".cluster.local"}
}
