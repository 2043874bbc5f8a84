package progress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
	"time"
)

// certificateLifetime is that of the generated CA and certificate, as the
// chart generated them before: long enough never to expire under a
// running operator; an expired one is replaced like any unusable one.
const certificateLifetime = 10 * 365 * 24 * time.Hour

// generateCertificates makes a self-signed CA and a serving certificate it
// signs for names, as the data of a kubernetes.io/tls Secret.
func generateCertificates(names []string, now time.Time) (map[string][]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: names[0] + " CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certificateLifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certificateLifetime),
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
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		secretCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		secretKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		secretCA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}, nil
}

// serial is a random 128-bit serial number. crypto/rand's reader never
// fails (Go 1.24), so neither does rand.Int.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	return n
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
